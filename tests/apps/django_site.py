"""A Django project in one module, as a Django app behind a TLS-terminating router is set up:
`SECURE_PROXY_SSL_HEADER` says the router's X-Forwarded-Proto tells the scheme, and
`SECURE_SSL_REDIRECT` sends plain-http requests to https. No proxy middleware. `/whoami` says
what Django concluded about the request; `/whoami-async` is the same as an async view, for the
ASGI handler (`asgi_application`).
"""

from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="headway-tests",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    MIDDLEWARE=["django.middleware.security.SecurityMiddleware"],
    SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"),
    SECURE_SSL_REDIRECT=True,
)

from django.core.asgi import get_asgi_application  # noqa: E402 (settings first)
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402


def whoami(request):
    return JsonResponse({
        "secure": request.is_secure(),
        "client": request.META.get("REMOTE_ADDR", ""),
        "url": request.build_absolute_uri(),
    })


async def whoami_async(request):
    return whoami(request)


urlpatterns = [path("whoami", whoami), path("whoami-async", whoami_async)]
application = get_wsgi_application()
asgi_application = get_asgi_application()
