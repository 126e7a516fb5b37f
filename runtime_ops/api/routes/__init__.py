"""The ops API's routes, one module per concern; each exposes `router` and `create_app` includes them all."""
