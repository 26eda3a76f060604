"""Models the learner builds or loads: the tiny default model and tokenizer (:mod:`.tiny`), local pretrained
models (:mod:`.pretrained`) and LoRA adapters (:mod:`.lora`, peft imported lazily)."""
