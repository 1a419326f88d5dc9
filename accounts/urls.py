from django.urls import path

from accounts import views
from accounts.apis import ApiTokenDetailApi, ApiTokenListApi, WhoAmIApi

urlpatterns = [
    path("api/v1/whoami/", WhoAmIApi.as_view(), name="api-whoami"),
    path("api/v1/tokens/", ApiTokenListApi.as_view(), name="api-tokens"),
    path("api/v1/tokens/<int:token_id>/", ApiTokenDetailApi.as_view(), name="api-token"),
    path("account/", views.account_page, name="account"),
]
