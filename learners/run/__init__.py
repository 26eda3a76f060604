"""Run tooling around the core loop: the run folder and its records (:mod:`.run_folder`), checkpoints
(:mod:`.checkpoint`), evaluation runs (:mod:`.eval_run`), re-scoring (:mod:`.reverify`) and the report
(:mod:`.report`, :mod:`.svg_chart`). The command line (``dapo_env.learners.cli``) drives them."""
