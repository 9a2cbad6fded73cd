"""One module per `neuronpipe` subcommand."""

# The region the AWS commands (run --aws, status, pull from s3://) talk to: control_plane.aws.default_region.
REGION_HELP = (
    "AWS region of the deployment (default: $AWS_REGION, else $AWS_DEFAULT_REGION, else cdk.json's "
    "context.neuronpipe.region, else the AWS profile's)"
)
