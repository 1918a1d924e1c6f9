"""TRL's environment_factory on `delegate env`, through OpenEnv's client.

Serve the environment first (docs/openenv.md):

    export DELEGATE_ENV_TOKEN=$(openssl rand -hex 16)
    ./delegate env --config examples/world.yaml --split train

Then point this class at it. OpenEnv's client sends no headers of its
own, so the token goes in the URL as the password, which its WebSocket
library sends as Basic credentials. Use a token of letters, digits and
"-_.~": the URL carries it as written. Without a token, on loopback,
use http://127.0.0.1:8010.

Needs: pip install openenv-core trl
"""

import os

from openenv import GenericEnvClient

TOKEN = os.environ.get("DELEGATE_ENV_TOKEN", "")
BASE_URL = f"http://trl:{TOKEN}@127.0.0.1:8010" if TOKEN else "http://127.0.0.1:8010"


class DelegateEnv:
    """One episode at a time of `delegate env`: a word problem whose steps
    can be delegated to a cheaper sub-agent model."""

    def __init__(self):
        self.client = GenericEnvClient(base_url=BASE_URL).sync()
        self.client.connect()
        self.reward = 0.0
        self.done = False

    def reset(self, **kwargs) -> str:
        # A dataset row's seed, if it has one, draws the same problem each time.
        seed = kwargs.get("seed")
        result = self.client.reset(seed=seed) if seed is not None else self.client.reset()
        self.reward, self.done = 0.0, False
        return result.observation["task"]

    def delegate(self, question: str = "", questions: list[str] | None = None) -> str:
        """Hand self-contained questions, such as 47*28, to the sub-agent.

        Give question, or questions to ask several at once.

        Args:
            question: One question, with every number it needs.
            questions: Up to 8 such questions, asked in parallel.

        Returns:
            The sub-agent's answer; for questions, a JSON array of the answers in order.
        """
        # Send what the model filled; the server refuses both, neither,
        # an empty list or more than 8, and says why.
        arguments = {}
        if questions is not None:
            arguments["questions"] = list(questions)
        if question or questions is None:
            arguments["question"] = question
        return self._call("delegate", arguments)

    def answer(self, answer: str) -> str:
        """Give the final answer. It ends the episode.

        Args:
            answer: The answer, an integer.

        Returns:
            Whether the answer is correct.
        """
        return self._call("answer", {"answer": answer})

    def _call(self, tool: str, arguments: dict) -> str:
        if self.done:
            raise ValueError("The episode is over: the answer was given.")
        result = self.client.step({"type": "call_tool", "tool_name": tool, "arguments": arguments})
        self.done = result.done
        if result.reward is not None:
            self.reward = result.reward
        obs = result.observation
        if obs.get("error"):
            return "error: " + obs["error"]["message"]
        return obs["result"]


def reward_func(environments, **kwargs):
    """The world's reward of each instance's last episode."""
    return [env.reward for env in environments]


# trainer = GRPOTrainer(model=..., train_dataset=..., reward_funcs=reward_func,
#                       environment_factory=DelegateEnv, args=GRPOConfig(...))
