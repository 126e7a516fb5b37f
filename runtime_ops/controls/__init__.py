"""What operators do by hand, through the CLI and the ops API: rollouts listed, shown and stopped, production rolled
back (`rollouts.py`)."""
