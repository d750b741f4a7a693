"""A fake of Google's Code Assist API that refuses the account, as it refuses a personal Google
account since Google moved those to its Antigravity CLI (2026-06-18).

gemini 0.61.0 signed in with Google (``GOOGLE_GENAI_USE_GCA=true`` and an access token in
``GOOGLE_CLOUD_ACCESS_TOKEN``, so no browser and no token refresh) asks
``$CODE_ASSIST_ENDPOINT/v1internal:loadCodeAssist`` which tier the account has. This fake answers
with no current tier and the free tier among the ineligible ones; gemini then onboards
(``:onboardUser``, answered done with no project) and throws its ``IneligibleTierError``, whose
message is the tier's ``reasonMessage``. The reason text is the server's: only its end ("migrate
to the Antigravity suite") is known from reports, so the fake's wording around it is ours.

    with FakeCodeAssist() as ca:
        env.update(code_assist_env(ca.url))
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.doubles.served import JsonHandler, ServedFake

#: The refusal's reason, ending as the reports quote it.
REASON = (
    "This Google account can no longer use Gemini CLI. Personal accounts must migrate to the "
    "Antigravity suite"
)


def code_assist_env(url: str, token: str = "ya29.fake-access-token") -> dict[str, str]:
    """What makes gemini sign in with Google against ``url`` without a browser."""
    return {"GOOGLE_GENAI_USE_GCA": "true", "GOOGLE_CLOUD_ACCESS_TOKEN": token, "CODE_ASSIST_ENDPOINT": url}


class FakeCodeAssist(ServedFake):
    def __init__(self, port: int = 0, reason: str = REASON) -> None:
        self._init_served(port, None, "fake-code-assist")
        self.reason = reason

    def handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(JsonHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
                pass

            def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                method = self.path.rsplit(":", 1)[-1]
                fake.record({"kind": "main", "method": method, "path": self.path, "body": body})
                if method == "loadCodeAssist":
                    tier = {"id": "free-tier", "name": "Gemini Code Assist for individuals"}
                    self._json(
                        200,
                        {
                            "allowedTiers": [{**tier, "isDefault": True}],
                            "ineligibleTiers": [
                                {
                                    "reasonCode": "INELIGIBLE_ACCOUNT",
                                    "reasonMessage": fake.reason,
                                    "tierId": tier["id"],
                                    "tierName": tier["name"],
                                }
                            ],
                        },
                    )
                elif method == "onboardUser":
                    self._json(200, {"done": True, "response": {}})
                else:
                    self._json(404, {"error": {"code": 404, "message": "not faked", "status": "NOT_FOUND"}})

        return Handler
