"""The algorithm: pure losses and advantage estimators (:mod:`.losses`, :mod:`.turn_credit`), the training batch
(:mod:`.batch`), log-probs (:mod:`.logprobs`) and the policy update (:mod:`.update`): the analogue of verl's
``core_algos``. Nothing here owns a rollout or a run folder."""
