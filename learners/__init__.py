"""The bundled DAPO learner (needs torch and transformers; the environment layer never imports this)."""

from __future__ import annotations
