from django.urls import path

from runs import apis

urlpatterns = [
    path("configurations/", apis.ConfigurationListApi.as_view(), name="api-configurations"),
    path("configurations/lint/", apis.DocumentLintApi.as_view(), name="api-document-lint"),
    path(
        "configurations/launch-command/",
        apis.DocumentLaunchCommandApi.as_view(),
        name="api-document-launch-command",
    ),
    path(
        "configurations/import-command/",
        apis.ImportCommandApi.as_view(),
        name="api-import-command",
    ),
    path(
        "configurations/<int:config_id>/",
        apis.ConfigurationDetailApi.as_view(),
        name="api-configuration",
    ),
    path(
        "configurations/<int:config_id>/diff/",
        apis.ConfigurationDiffApi.as_view(),
        name="api-configuration-diff",
    ),
    path(
        "configurations/<int:config_id>/launch-command/",
        apis.ConfigurationLaunchCommandApi.as_view(),
        name="api-configuration-launch-command",
    ),
    path(
        "configurations/<int:config_id>/lint/",
        apis.ConfigurationLintApi.as_view(),
        name="api-configuration-lint",
    ),
    path("hosts/", apis.HostListApi.as_view(), name="api-hosts"),
    path("hosts/<slug:name>/", apis.HostDetailApi.as_view(), name="api-host"),
    path("hosts/<slug:name>/token/", apis.HostTokenApi.as_view(), name="api-host-token"),
]
