"""What only the codecs share: exact JSON, tool schemas, delta runs, stop tables, token
estimates, rate-limit headers, the OpenAI family's common parts."""
