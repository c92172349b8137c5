"""Django behind proxai_asgi: wrap the ASGI application Django gives you.

    DJANGO_SETTINGS_MODULE=examples.django_project.settings \
    PROXAI_UPSTREAM_URL=http://127.0.0.1:8000/v1 uvicorn examples.django_project.asgi:application
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "examples.django_project.settings")

from django.core.asgi import get_asgi_application

from proxai_asgi import ProxaiMiddleware, Upstream

application = ProxaiMiddleware(
    get_asgi_application(),
    upstream=Upstream(
        os.environ.get("PROXAI_UPSTREAM_PROTOCOL", "openai_chat_completions"),  # type: ignore[arg-type]
        os.environ.get("PROXAI_UPSTREAM_URL", "http://127.0.0.1:8000/v1"),
        api_key=os.environ.get("PROXAI_API_KEY"),
    ),
)
