"""An agent as E2B's Python SDK users write one, against the CubePod gateway.

Run by gateway.test.ts with E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set; prints one JSON
object of what it saw.
"""
import json

from e2b import Sandbox, SandboxQuery

sbx = Sandbox.create("cold", metadata={"lang": "python"}, envs={"FROM": "python"})
seen = {"id": sbx.sandbox_id}
seen["stdout"] = sbx.commands.run("echo from python").stdout
seen["env"] = sbx.commands.run("printenv FROM").stdout
seen["state"] = sbx.get_info().state.value
seen["listed"] = [
    s.sandbox_id for s in Sandbox.list(query=SandboxQuery(metadata={"lang": "python"})).next_items()
]
seen["paused"] = sbx.pause()
seen["state_after_pause"] = Sandbox.get_info(sbx.sandbox_id).state.value
resumed = Sandbox.connect(sbx.sandbox_id)
seen["stdout_after_resume"] = resumed.commands.run("echo resumed").stdout
seen["env_after_resume"] = resumed.commands.run("printenv FROM").stdout
seen["killed"] = resumed.kill()
seen["killed_again"] = Sandbox.kill(sbx.sandbox_id)
print(json.dumps(seen))
