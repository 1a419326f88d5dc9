from django.urls import path

from experiments import apis, views

urlpatterns = [
    path("api/v1/experiments/", apis.ExperimentListApi.as_view(), name="api-experiments"),
    path(
        "api/v1/experiments/<int:experiment_id>/",
        apis.ExperimentDetailApi.as_view(),
        name="api-experiment",
    ),
    path(
        "api/v1/experiments/<int:experiment_id>/plan/",
        apis.ExperimentPlanApi.as_view(),
        name="api-experiment-plan",
    ),
    path(
        "api/v1/experiments/<int:experiment_id>/cells/",
        apis.ExperimentCellsApi.as_view(),
        name="api-experiment-cells",
    ),
    path(
        "api/v1/experiments/<int:experiment_id>/start/",
        apis.ExperimentStartApi.as_view(),
        name="api-experiment-start",
    ),
    path(
        "api/v1/experiments/<int:experiment_id>/cancel/",
        apis.ExperimentCancelApi.as_view(),
        name="api-experiment-cancel",
    ),
    path("experiments/<int:experiment_id>/", views.experiment_page, name="experiment-page"),
]
