from django.urls import path

from experiments import agent_apis, apis, views

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
    path("api/v1/runs/", apis.RunListApi.as_view(), name="api-runs"),
    path("api/v1/runs/<int:run_id>/", apis.RunDetailApi.as_view(), name="api-run"),
    path("api/v1/runs/<int:run_id>/summary/", apis.RunSummaryApi.as_view(), name="api-run-summary"),
    path("api/v1/runs/<int:run_id>/cancel/", apis.RunCancelApi.as_view(), name="api-run-cancel"),
    path(
        "api/v1/runs/<int:run_id>/requests/",
        apis.RunRequestsApi.as_view(),
        name="api-run-requests",
    ),
    path(
        "api/v1/runs/<int:run_id>/requests.jsonl",
        apis.RunRequestsDownloadApi.as_view(),
        name="api-run-requests-download",
    ),
    # The agents' surface (host token), DESIGN §5.
    path("api/v1/agent/runs/<int:run_id>", agent_apis.AgentRunApi.as_view(), name="agent-run"),
    path(
        "api/v1/agent/runs/<int:run_id>/claim",
        agent_apis.AgentRunClaimApi.as_view(),
        name="agent-run-claim",
    ),
    path("api/v1/agent/heartbeat", agent_apis.AgentHeartbeatApi.as_view(), name="agent-heartbeat"),
    path(
        "api/v1/agent/runs/<int:run_id>/progress",
        agent_apis.AgentRunProgressApi.as_view(),
        name="agent-run-progress",
    ),
    path(
        "api/v1/agent/runs/<int:run_id>/result",
        agent_apis.AgentRunResultApi.as_view(),
        name="agent-run-result",
    ),
    path("experiments/<int:experiment_id>/", views.experiment_page, name="experiment-page"),
]
