"""The state the Responses protocol promises: stored responses and their endpoints, the
Codex WebSocket, compaction. The engines themselves are ``proxai_asgi.store``."""
