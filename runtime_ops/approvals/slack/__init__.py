"""The Slack side of approvals, one concern per module (import from the module, not from this package):

- `blocks`: what an approval message shows (`RequestView`) rendered as Block Kit; pure.
- `text`: escaping, truncation, mentions, links and times in Slack mrkdwn; pure.
- `client`: `slack_client` (a slack_sdk `WebClient` via dagster-slack) and `SlackNotifier` (post, update,
  thread, ephemeral, `response_url`); the only module here that does I/O.
- `interactions`: a button click's raw form body → `Interaction`, or `MalformedInteraction` (a 400); pure.
- `signing`: Slack's request signature and replay window; pure.

A click is *counted* elsewhere: `runtime_ops.decisions.decide` (the route is `runtime_ops.api.routes.slack`).
"""
