"""The cloud rehearsal: the AWS run of a request executed end to end on this machine (``neuronpipe rehearse``).

moto is AWS (a server on loopback, in this process); the resources come from the synthesized templates
(:mod:`.cfn`); boxes are sandbox directories with a loopback IMDS (:mod:`.boxes`) whose SSM agent is emulated
(:mod:`.ssm_agent`); Lambdas run isolated with exactly the layer's packages (:mod:`.lambdas`); events reach them
through the rules' patterns and input transformers (:mod:`.events`); each actor calls AWS with credentials bound
to its synthesized policy (:mod:`.iam`). :mod:`.run` puts it together; :mod:`.summary` reports it.
"""
