"""One module per `neuronpipe` subcommand."""
