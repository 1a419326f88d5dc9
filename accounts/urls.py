from django.urls import path

from accounts.views import WhoAmIApi

urlpatterns = [
    path("whoami/", WhoAmIApi.as_view(), name="api-whoami"),
]
