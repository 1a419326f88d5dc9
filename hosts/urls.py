from django.urls import path

from hosts import apis, views

urlpatterns = [
    path("api/v1/hosts/", apis.HostListApi.as_view(), name="api-hosts"),
    path("api/v1/hosts/<slug:name>/", apis.HostDetailApi.as_view(), name="api-host"),
    path("api/v1/hosts/<slug:name>/token/", apis.HostTokenApi.as_view(), name="api-host-token"),
    path("hosts/", views.host_list_page, name="host-list"),
]
