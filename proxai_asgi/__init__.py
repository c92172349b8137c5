"""proxai_asgi: any LLM client protocol against any LLM upstream protocol."""
