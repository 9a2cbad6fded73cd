"""What people and events talk to: run requests and plans, Lambda handlers, the `neuronpipe` CLI."""
