"""Token-exact tool episodes with chat templates that render tools: a ChatML/Qwen2.5-style template (tools in the
system message, ``<tool_call>`` blocks, consecutive tool results grouped in one user turn) and a Llama-3.1-style
one (tools in the first user message, ``{"name", "parameters"}`` calls, ``ipython`` results). Both are built
offline as Jinja strings on locally trained tokenizers. The trajectory a learner trains on equals the template's
rendering of the whole conversation (assistant calls as structured ``tool_calls``, results as ``tool``
messages) token for token, and every sampled token keeps the engine's log-prob."""

from __future__ import annotations

import re

import pytest
from multiturn_helpers import ScriptedEngine, _CORPUS, engine_view, learner_view
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from dapo_env import ChatTokens, EpisodeGroupEnv, MultiTurnEnv, TurnRequest
from dapo_env.tasks import get_task
from dapo_env.tools import ToolCall, format_tool_call

QWEN_TOOLS = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- else %}"
    "{{- 'You are a helpful assistant.' }}{%- endif %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) or "
    "(message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>' + message.role }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}{{- '\", \"arguments\": ' }}"
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

LLAMA31_TOOLS = (
    "{{- bos_token }}"
    "{%- if not tools is defined %}{%- set tools = none %}{%- endif %}"
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] | trim %}"
    "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = '' %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
    "{%- if tools is not none %}{{- 'Environment: ipython\\n' }}{%- endif %}"
    "{{- 'Cutting Knowledge Date: December 2023\\nToday Date: 26 Jul 2024\\n\\n' }}"
    "{{- system_message }}{{- '<|eot_id|>' }}"
    "{%- if tools is not none %}{%- set first_user_message = messages[0]['content'] | trim %}"
    "{%- set messages = messages[1:] %}"
    "{{- '<|start_header_id|>user<|end_header_id|>\\n\\n' }}"
    "{{- 'Given the following functions, please respond with a JSON for a function call with its proper arguments '"
    "'that best answers the given prompt.\\n\\n' }}"
    "{{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}"
    "{{- 'Do not use variables.\\n\\n' }}"
    "{%- for t in tools %}{{- t | tojson(indent=4) }}{{- '\\n\\n' }}{%- endfor %}"
    "{{- first_user_message + '<|eot_id|>' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{%- elif 'tool_calls' in message %}{%- set tool_call = message.tool_calls[0].function %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{{- '{\"name\": \"' + tool_call.name + '\", ' }}{{- '\"parameters\": ' }}{{- tool_call.arguments | tojson }}"
    "{{- '}' }}{{- '<|eot_id|>' }}"
    "{%- else %}{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' }}{{- message.content }}{{- '<|eot_id|>' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)

_TOOL_CORPUS = _CORPUS + [
    '<tool_call>\n{"name": "lookup", "arguments": {"key": "apple"}}\n</tool_call>',
    '{"name": "lookup", "parameters": {"key": "birch"}}',
    "Find the number stored under the key cedar in the hidden table. Call the lookup tool to read it, then reply "
    "with the number only.",
    "no key 'x' in the table <tool_response> </tool_response> Environment: ipython",
]


# Llama 3's pre-tokenizer split (its tokenizer.json): newlines run together ("\n\n" before "{" is one piece), so
# a header's "\n\n" tokenizes alike alone and before the model's text.
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")


def llama_tokenizer(template: str = LLAMA31_TOOLS) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained here, with Llama 3.1's special tokens, pre-tokenizer split and
    ``template``."""
    special = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
               "<|python_tag|>"]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(_TOOL_CORPUS * 20, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                  pad_token="<|end_of_text|>",
                                  extra_special_tokens=["<|start_header_id|>", "<|end_header_id|>", "<|python_tag|>"])
    tok.chat_template = template
    return tok


def qwen_tokenizer() -> PreTrainedTokenizerFast:
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(_TOOL_CORPUS * 20, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  extra_special_tokens=["<|im_start|>"])
    tok.chat_template = QWEN_TOOLS
    return tok


def _key(prompt: str) -> str:
    return re.search(r"under the key (\w+)", prompt).group(1)


def table_policy(tool_format: str):
    """Turn 0: look up a missing key and the asked one (hermes/mistral: both in one turn; llama3: one call per
    turn, as its template renders); then answer with the number the tool returned."""

    def policy(request: TurnRequest) -> str:
        user = [m for m in request.messages if m["role"] == "user"][0]["content"]
        key, results = _key(user), [m["content"] for m in request.messages if m["role"] == "tool"]
        if tool_format == "llama3":
            script = [[("lookup", {"key": "nosuchkey"})], [("lookup", {"key": key})]]
        else:
            script = [[("lookup", {"key": "nosuchkey"}), ("lookup", {"key": key})]]
        if request.turn < len(script):
            prefix = "I will look it up.\n" if tool_format == "hermes" else ""
            return prefix + format_tool_call(tool_format, script[request.turn])
        return results[-1]

    return policy


CASES = {"qwen-hermes": (qwen_tokenizer, "hermes"), "llama31-llama3": (llama_tokenizer, "llama3")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tool_trajectory_is_the_templates_rendering_of_the_conversation(case: str) -> None:
    make, tool_format = CASES[case]
    tok = make()
    task = get_task("HiddenTable-v0")
    env = EpisodeGroupEnv(task, num_envs=2 * 2, group_size=2, tokenizer=tok, tool_format="auto", size=40)
    env.reset(seed=3)
    engine = ScriptedEngine(tok, table_policy(tool_format))
    groups = env.rollout(engine).groups
    env.close()
    spec = task.interaction.specs[0].to_openai()
    for b, group in enumerate(groups):
        for g, traj in enumerate(group.completions):
            assert group.correct[g] and traj.episode_return == 1.0
            key = f"0:{b}:{g}"
            # every sampled token keeps its log-prob and its exact context
            assert learner_view(traj) == engine_view(engine, key, traj.num_turns)
            assert all(lp == 0.0 for lp, m in zip(traj.logprobs, traj.sampled_mask) if m == 0)
            calls = [ToolCall(**c) for c in group.infos[g]["tool_calls"]]
            assert [c.status for c in calls] == ["ok", "ok"] and calls[0].result.startswith("no key")
            # the whole conversation, rendered at once by the template
            prompt = task.format_prompt(env.problems[int(group.problem_id.split("-")[1])])
            messages, used = [{"role": "user", "content": prompt}], 0
            for turn in traj.turns[:-1]:
                n = 1 if tool_format == "llama3" else 2
                turn_calls, used = calls[used:used + n], used + n
                prose = "I will look it up." if tool_format == "hermes" else ""
                messages.append({"role": "assistant", "content": prose, "tool_calls": [
                    {"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in turn_calls]})
                messages += [{"role": "tool", "content": c.message} for c in turn_calls]
            messages.append({"role": "assistant", "content": traj.turns[-1].text})
            rendered = tok.apply_chat_template(messages, tools=[spec], tokenize=False)
            expected = tok.encode(rendered, add_special_tokens=False)
            tail = tok.encode("\n", add_special_tokens=False) if tool_format == "hermes" else []
            assert list(traj.prompt_token_ids + traj.token_ids) + tail == expected, case
            assert "lookup" in tok.decode(traj.prompt_token_ids)  # the tools were rendered into the prompt


def test_auto_reads_the_format_from_the_template_and_requests_carry_the_tools() -> None:
    for make, expected in ((qwen_tokenizer, "hermes"), (llama_tokenizer, "llama3")):
        env = MultiTurnEnv("HiddenTable-v0", tokenizer=make(), tool_format="auto")
        env.reset(seed=0)
        assert env.episode.tool_format == expected
        request = env.episode.request()
        assert request.tools[0]["function"]["name"] == "lookup"
    env = MultiTurnEnv("GSM8KTool-v0", tokenizer=qwen_tokenizer(), tool_format="auto",
                       data_files=str(__import__("multiturn_helpers").SAMPLES / "gsm8k_sample.jsonl"))
    env.reset(seed=0)
    assert env.episode.tool_format == "hermes" and "python" in env.episode.prompt_text
    env = MultiTurnEnv("GSM8KTool-v0", tokenizer=qwen_tokenizer(),
                       data_files=str(__import__("multiturn_helpers").SAMPLES / "gsm8k_sample.jsonl"))
    env.reset(seed=0)  # fenced (the default): no tools rendered, the prompt describes the protocol
    assert env.episode.tool_format == "fenced" and "# Tools" not in env.episode.prompt_text
    assert env.episode.request().tools is None


def test_chat_tokens_renders_several_tool_results_as_one_grouped_reply() -> None:
    tok = qwen_tokenizer()
    chat = ChatTokens(tok).with_tools([get_task("HiddenTable-v0").interaction.specs[0]])
    text, ids = chat.replies([{"role": "tool", "content": "7"}, {"role": "tool", "content": "no key"}],
                             stop_token=tok.eos_token_id)
    assert text == ("\n<|im_start|>user\n<tool_response>\n7\n</tool_response>\n<tool_response>\nno key\n"
                    "</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert tok.decode(ids) == text
    assert chat.with_tools(chat.tools) is chat
