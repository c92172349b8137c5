from django.http import HttpRequest, JsonResponse
from django.urls import path


def status(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"django": "ok"})


urlpatterns = [path("status/", status)]
