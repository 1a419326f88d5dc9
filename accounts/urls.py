from django.urls import path

from accounts.apis import ApiTokenDetailApi, ApiTokenListApi, WhoAmIApi

urlpatterns = [
    path("whoami/", WhoAmIApi.as_view(), name="api-whoami"),
    path("tokens/", ApiTokenListApi.as_view(), name="api-tokens"),
    path("tokens/<int:token_id>/", ApiTokenDetailApi.as_view(), name="api-token"),
]
