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
    path(
        "api/v1/objectives/validate/",
        apis.ObjectivesValidateApi.as_view(),
        name="api-objectives-validate",
    ),
    path("experiments/", views.experiment_list_page, name="experiment-list"),
    path("experiments/new/", views.experiment_new_page, name="experiment-new"),
    path("experiments/<int:experiment_id>/", views.experiment_page, name="experiment-page"),
    path("experiments/<int:experiment_id>/live/", views.experiment_live, name="experiment-live"),
    # A section is named ``workload:<name>`` or ``cell:<workload>/<load>``.
    path(
        "experiments/<int:experiment_id>/figures/<path:section>/figures.json",
        views.section_figures,
        name="experiment-section-figures",
    ),
    path(
        "experiments/<int:experiment_id>/figures/<path:section>/<slug:name>.csv",
        views.section_csv,
        name="experiment-section-csv",
    ),
    path(
        "experiments/<int:experiment_id>/figures/<path:section>/",
        views.cell_fragment,
        name="experiment-section",
    ),
    path(
        "experiments/<int:experiment_id>/cells/<path:cell>/",
        views.cell_page,
        name="experiment-cell",
    ),
    path("compare/", views.compare_page, name="compare"),
]
