"""Plays one episode with examples/trl/delegate_env.py's class, as TRL
would call its methods, and prints what each call returned as JSON.

Usage: drive.py HOST:PORT SEED ANSWER QUESTION...
The token comes from $DELEGATE_ENV_TOKEN, as the example reads it.
This directory's openenv.py stands in for OpenEnv's client."""

import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(1, os.path.join(here, "..", "..", "..", "..", "examples", "trl"))

import delegate_env  # noqa: E402

addr, seed, answer, questions = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
token = os.environ.get("DELEGATE_ENV_TOKEN", "")
# The example serves 127.0.0.1:8010; the test's server listens elsewhere.
delegate_env.BASE_URL = f"http://trl:{token}@{addr}" if token else f"http://{addr}"

env = delegate_env.DelegateEnv()
out = {"task": env.reset(seed=seed)}
out["one"] = env.delegate(question=questions[0])
out["many"] = env.delegate(questions=questions)
out["too_many"] = env.delegate(questions=["1*1"] * 9)
out["both"] = env.delegate(question=questions[0], questions=questions)
out["answer"] = env.answer(answer)
out["reward"], out["done"] = env.reward, env.done
try:
    env.delegate(question=questions[0])
    out["after_done"] = ""
except ValueError as e:
    out["after_done"] = str(e)
env.client.close()
json.dump(out, sys.stdout)
