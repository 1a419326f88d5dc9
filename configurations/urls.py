from django.urls import path

from configurations import apis, views

urlpatterns = [
    path("api/v1/configurations/", apis.ConfigurationListApi.as_view(), name="api-configurations"),
    path("api/v1/configurations/lint/", apis.DocumentLintApi.as_view(), name="api-document-lint"),
    path(
        "api/v1/configurations/launch-command/",
        apis.DocumentLaunchCommandApi.as_view(),
        name="api-document-launch-command",
    ),
    path(
        "api/v1/configurations/import-command/",
        apis.ImportCommandApi.as_view(),
        name="api-import-command",
    ),
    path(
        "api/v1/configurations/<int:config_id>/",
        apis.ConfigurationDetailApi.as_view(),
        name="api-configuration",
    ),
    path(
        "api/v1/configurations/<int:config_id>/diff/",
        apis.ConfigurationDiffApi.as_view(),
        name="api-configuration-diff",
    ),
    path(
        "api/v1/configurations/<int:config_id>/launch-command/",
        apis.ConfigurationLaunchCommandApi.as_view(),
        name="api-configuration-launch-command",
    ),
    path(
        "api/v1/configurations/<int:config_id>/lint/",
        apis.ConfigurationLintApi.as_view(),
        name="api-configuration-lint",
    ),
    path("configurations/", views.configuration_list_page, name="configuration-list"),
    path("configurations/<int:config_id>/", views.configuration_page, name="configuration"),
]
