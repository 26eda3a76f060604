"""dapo-env: reasoning tasks as Gymnasium environments with rule-based verifiers.

Importing this package registers every built-in task as a Gymnasium id, then the user's tasks: spec files in
the folders of ``DAPO_ENV_TASK_PATH`` and installed packages' ``dapo_env.tasks`` entry points (see
``dapo_env.tasks.discovery``). It never imports torch.

Example:
    >>> import gymnasium as gym
    >>> import dapo_env
    >>> env = gym.make("dapo_env:Arithmetic-v0")
    >>> prompt, info = env.reset(seed=0)
    >>> isinstance(prompt, str) and "answer" not in info
    True
"""

from __future__ import annotations

from dapo_env.types import CodeTests, Completion, Group, Problem, RolloutBatch, VerifyResult

from dapo_env import tasks  # noqa: E402,F401  (registers the built-in tasks' Gymnasium ids)
from dapo_env.completions import completion_from_token_ids, completions_from_token_ids  # noqa: E402
from dapo_env.envs import ReasoningEnv  # noqa: E402
from dapo_env.sampler import DynamicSampler, EnvSource, GroupEnv, RolloutSource  # noqa: E402
from dapo_env.shaping import OverlongPenalty, Shaping, map_reward, shape, soft_overlong_penalty  # noqa: E402
from dapo_env.spaces import UnicodeText  # noqa: E402
from dapo_env.vector import GroupVectorEnv  # noqa: E402
from dapo_env.chat_tokens import ChatTokens  # noqa: E402
from dapo_env.episodes import EpisodeGroupEnv  # noqa: E402
from dapo_env.multiturn import MultiTurnEnv, TurnRequest  # noqa: E402
from dapo_env.types import History, Interaction, Trajectory, TrajectoryTurn, Turn  # noqa: E402
from dapo_env.wrappers import ChatTemplate, OverlongFilter, RewardMap, SoftOverlongPenalty  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "ChatTemplate",
    "CodeTests",
    "Completion",
    "DynamicSampler",
    "EnvSource",
    "Group",
    "GroupEnv",
    "GroupVectorEnv",
    "OverlongFilter",
    "OverlongPenalty",
    "Problem",
    "ReasoningEnv",
    "RewardMap",
    "RolloutBatch",
    "RolloutSource",
    "Shaping",
    "SoftOverlongPenalty",
    "UnicodeText",
    "VerifyResult",
    "__version__",
    "completion_from_token_ids",
    "completions_from_token_ids",
    "map_reward",
    "shape",
    "soft_overlong_penalty",
]
__all__ += ["ChatTokens", "EpisodeGroupEnv", "History", "Interaction", "MultiTurnEnv", "Trajectory",  # multi-turn
            "TrajectoryTurn", "Turn", "TurnRequest"]

# The user's tasks, in every process: spec files on DAPO_ENV_TASK_PATH, then installed packages' entry points
# (group "dapo_env.tasks"). Last, so a plugin may import anything above. A broken source warns, never raises.
from dapo_env.tasks.discovery import discover as _discover  # noqa: E402

_discover()
