"""A Django project in one module, as a Django app behind a TLS-terminating router is set up:
`SECURE_PROXY_SSL_HEADER` says the router's X-Forwarded-Proto tells the scheme, and
`SECURE_SSL_REDIRECT` sends plain-http requests to https. No proxy middleware. `/whoami` says
what Django concluded about the request.
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

from django.core.wsgi import get_wsgi_application  # noqa: E402 (settings first)
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402


def whoami(request):
    return JsonResponse({
        "secure": request.is_secure(),
        "client": request.META.get("REMOTE_ADDR", ""),
        "url": request.build_absolute_uri(),
    })


urlpatterns = [path("whoami", whoami)]
application = get_wsgi_application()
