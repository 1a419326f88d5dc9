from django.urls import path

from runs import agent_apis, apis, views

urlpatterns = [
    path("api/v1/runs/", apis.RunListApi.as_view(), name="api-runs"),
    path("api/v1/imports/", apis.ImportApi.as_view(), name="api-imports"),
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
    path("runs/<int:run_id>/", views.run_page, name="run-page"),
    path(
        "runs/<int:run_id>/requests/<int:index>/timeline.json",
        views.request_timeline,
        name="run-request-timeline",
    ),
    path("runs/<int:run_id>/vllm.json", views.run_vllm_json, name="run-vllm-json"),
]
