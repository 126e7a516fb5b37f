"""Integration tests: real servers (PostgreSQL, Redis, moto, Alertmanager, local HTTP stand-ins for Slack and model
endpoints) and the code location driven in-process; the docker/ and deploy/k8s static checks."""
