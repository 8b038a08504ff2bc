"""The HTTP side: the FastAPI app, the status page, TLS and basic auth, uvicorn."""
