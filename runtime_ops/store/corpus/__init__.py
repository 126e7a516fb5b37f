"""The corpus in the state store: the landing ledger, documents and their chunks, chunking profiles, the change
feed and chunk embeddings."""
