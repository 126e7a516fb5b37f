"""The example inference pipeline's domain (the article's flow): records landed in a folder or S3 are labelled by a
model behind an OpenAI-compatible chat-completions endpoint, idempotently per item, with token and cost accounting
and accuracy on a labelled sample; the labels are published only after the approval gate approves them.

- ``tickets``: reading ticket files (pure); ``prompts``: the request for one ticket and its digest (pure);
- ``labels``: a reply's label and the accuracy on the labelled sample (pure); ``costs``: usage and cost (pure);
- ``completion``: what a call yields and the classifier interface (pure); ``summary``: the label set's evidence (pure);
- ``stand_in``: the local deterministic stand-in model (no endpoint needed); ``client``: the endpoint client;
- ``labelling``: labelling a batch under a concurrency cap, each result stored before it counts;
- ``assets``: the Dagster side (``tickets/ticket_labels``, ``tickets/published_labels``, job, sensor, schedule).
"""
