"""A model candidate's life from its approval request to production, as one state machine (`machine.py`, pure)."""
