"""Small vision models trained from scratch (the ``from_scratch`` lane): the image dataset format and its generator
(:mod:`.dataset`, numpy only), the models (:mod:`.models`) and the training loop (:mod:`.loop`), both torch."""
