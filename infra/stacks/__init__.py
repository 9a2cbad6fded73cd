"""The four stacks of the CDK app."""
