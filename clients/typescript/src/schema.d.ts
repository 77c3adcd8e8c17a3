/**
 * Generated from the gateway's GET /v1/openapi.json by openapi-typescript: do not edit.
 * Regenerate with `npm run generate` in clients/typescript (a test fails while stale).
 */

export interface paths {
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Liveness: 200 while the process serves (nothing is checked) */
        get: operations["getHealthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Readiness: 200 when every check is ok, else 503; check names and states only */
        get: operations["getReadyz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Prometheus metrics (text exposition format), for a scraper with an API key */
        get: operations["getMetrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/approvals/{id}/decision": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Decide an approval request: approve with a scope (and optional spending limits), or deny (an API key, or a signed callback); answers the decided request
         * @description Checks in the order 404, 401, 409, 400, 403 (decisions.md). The body is read up to 64 KiB. `limits` (approve with a scope other than once) makes the grant cover only requests within them; limits that leave out the request being approved are 400 invalid_decision (docs/policies-approvals.md, Spending mandates).
         */
        post: operations["postApprovalsByIdDecision"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/slack/interactivity": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Slack interactivity: a button press on an approval card (signed by Slack)
         * @description Body: application/x-www-form-urlencoded `payload=<JSON>` of type block_actions, as Slack sends it; headers X-Slack-Request-Timestamp and X-Slack-Signature (v0 HMAC-SHA256 with the signing secret of the approval's developer). A signature is accepted once, within 5 minutes of its timestamp. Not for developers to call.
         */
        post: operations["postSlackInteractivity"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/oauth/{provider}/callback": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** OAuth callback (public; the provider sends the end user's browser here) */
        get: operations["getOauthByProviderCallback"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/browser/view/{token}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The takeover viewer page (public; the token is the credential); its WebSocket is /v1/browser/view/{token}/ws */
        get: operations["getBrowserViewByToken"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This document: the OpenAPI 3.1 description of every route, generated from the routes and their joi schemas at start */
        get: operations["getOpenapiJson"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List environments, ascending by created_at then id (destroyed ones included) */
        get: operations["getEnvironments"];
        put?: never;
        /** Create an environment (one non-destroyed environment per end user) */
        post: operations["postEnvironments"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/batch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Create up to 200 environments; each item answers {environment} or its own error */
        post: operations["postEnvironmentsBatch"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get an environment */
        get: operations["getEnvironmentsById"];
        put?: never;
        post?: never;
        /** Destroy an environment (desired_state destroyed; a repeat succeeds) */
        delete: operations["deleteEnvironmentsById"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/suspend": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Suspend (desired_state suspended) */
        post: operations["postEnvironmentsByIdSuspend"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/resume": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Resume (desired_state running; not activity) */
        post: operations["postEnvironmentsByIdResume"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/wake": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Wake (running, and counts as activity) */
        post: operations["postEnvironmentsByIdWake"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/keep-awake": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Keep the environment awake for a number of seconds */
        post: operations["postEnvironmentsByIdKeepAwake"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/resources": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        /** Change resources (only the fields sent; {} reads) */
        patch: operations["patchEnvironmentsByIdResources"];
        trace?: never;
    };
    "/v1/environments/{id}/idle": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        /** Change the idle ladder */
        patch: operations["patchEnvironmentsByIdIdle"];
        trace?: never;
    };
    "/v1/environments/{id}/config": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get the configuration (env and files) */
        get: operations["getEnvironmentsByIdConfig"];
        /** Replace the configuration (env and files) */
        put: operations["putEnvironmentsByIdConfig"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List events, ascending by integer id */
        get: operations["getEnvironmentsByIdEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/wakeups": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List pending wakeups, ascending by at */
        get: operations["getEnvironmentsByIdWakeups"];
        put?: never;
        /** Schedule a wakeup */
        post: operations["postEnvironmentsByIdWakeups"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/wakeups/{wakeupId}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Cancel a pending wakeup (404 once fired or cancelled) */
        delete: operations["deleteEnvironmentsByIdWakeupsByWakeupId"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/schedules": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the agent's schedules */
        get: operations["getEnvironmentsByIdSchedules"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/schedules/{key}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Delete a schedule by key */
        delete: operations["deleteEnvironmentsByIdSchedulesByKey"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/agent-settings": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get the agent settings (scheduling and keep-awake limits) */
        get: operations["getEnvironmentsByIdAgentSettings"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        /** Change agent settings (only the fields sent; {} reads) */
        patch: operations["patchEnvironmentsByIdAgentSettings"];
        trace?: never;
    };
    "/v1/templates": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List templates */
        get: operations["getTemplates"];
        put?: never;
        /** Register a template version (status building) */
        post: operations["postTemplates"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/templates/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a template */
        get: operations["getTemplatesById"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/templates/{id}/ready": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Mark a template ready (stands in for the builder) */
        post: operations["postTemplatesByIdReady"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/templates/{id}/failed": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Mark a template failed (stands in for the builder) */
        post: operations["postTemplatesByIdFailed"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/exec": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run a command in the environment (wakes it); JSON when done, or a text/event-stream with Accept: text/event-stream
         * @description With `Accept: text/event-stream` the answer streams: events stdout and stderr carry {data} as output comes, and one exit event {exit_code, duration_ms, timed_out} ends it.
         */
        post: operations["postEnvironmentsByIdExec"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/files": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Read a file (at most 16 MiB), base64 */
        get: operations["getEnvironmentsByIdFiles"];
        /** Write a file on the environment's data disk */
        put: operations["putEnvironmentsByIdFiles"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/hosts": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The platform's hosts and their measured isolation */
        get: operations["getHosts"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/usage": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Running seconds this month and the limit */
        get: operations["getUsage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/usage/limit": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /** Set the monthly running-seconds limit */
        put: operations["putUsageLimit"];
        post?: never;
        /** Remove the limit */
        delete: operations["deleteUsageLimit"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agent-version": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The default agent version of new environments */
        get: operations["getAgentVersion"];
        /** Set (or clear with null) the default agent version */
        put: operations["putAgentVersion"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/agent-upgrade": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Upgrade one environment's agent */
        post: operations["postEnvironmentsByIdAgentUpgrade"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agent-rollouts": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List rollouts */
        get: operations["getAgentRollouts"];
        put?: never;
        /** Start a rollout of an agent version to every environment */
        post: operations["postAgentRollouts"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agent-rollouts/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a rollout */
        get: operations["getAgentRolloutsById"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/browser/profiles": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List browser profiles, ascending by created_at */
        get: operations["getBrowserProfiles"];
        put?: never;
        /** Create a browser profile */
        post: operations["postBrowserProfiles"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/browser/profiles/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a browser profile */
        get: operations["getBrowserProfilesById"];
        put?: never;
        post?: never;
        /** Delete a browser profile and its signed-in state */
        delete: operations["deleteBrowserProfilesById"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/browser/leases": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List browser leases */
        get: operations["getBrowserLeases"];
        put?: never;
        /** Open a browser lease (answers once active) */
        post: operations["postBrowserLeases"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/browser/leases/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a browser lease */
        get: operations["getBrowserLeasesById"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/browser/leases/{id}/renew": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Renew a lease for 15 more minutes */
        post: operations["postBrowserLeasesByIdRenew"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/browser/leases/{id}/release": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Release a lease (a write lease saves its state unless save is false) */
        post: operations["postBrowserLeasesByIdRelease"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/browser/leases/{id}/takeover": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Take the browser over: a one-time viewer URL for a person */
        post: operations["postBrowserLeasesByIdTakeover"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/browser/leases/{id}/handback": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Hand the browser back to the agent */
        post: operations["postBrowserLeasesByIdHandback"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/browser/limits": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Lease limits and durations */
        get: operations["getBrowserLimits"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/gateway": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Proxy URL (with this environment's credentials) and CA certificate, to use the gateway from anywhere */
        get: operations["getEnvironmentsByIdGateway"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/secrets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the environment's secrets (never their values) */
        get: operations["getEnvironmentsByIdSecrets"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/secrets/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /** Create (201) or replace (200) an environment secret */
        put: operations["putEnvironmentsByIdSecretsByName"];
        post?: never;
        /** Delete an environment secret */
        delete: operations["deleteEnvironmentsByIdSecretsByName"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/secrets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the developer-level secrets (every environment) */
        get: operations["getSecrets"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/secrets/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /** Create (201) or replace (200) a developer-level secret */
        put: operations["putSecretsByName"];
        post?: never;
        /** Delete a developer-level secret */
        delete: operations["deleteSecretsByName"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/egress": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The environment's egress allowlist and the effective one */
        get: operations["getEnvironmentsByIdEgress"];
        /** Set (or clear with null) the environment's egress allowlist, and what happens to other hosts */
        put: operations["putEnvironmentsByIdEgress"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/egress": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The developer's default egress allowlist */
        get: operations["getEgress"];
        /** Set (or clear with null) the developer's default egress allowlist */
        put: operations["putEgress"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/mcp-servers": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the developer's MCP server registrations */
        get: operations["getMcpServers"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/mcp-servers/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a developer-level MCP server registration */
        get: operations["getMcpServersByName"];
        /** Register (201) or replace (200) an MCP server for every environment */
        put: operations["putMcpServersByName"];
        post?: never;
        /** Remove a developer-level MCP server registration */
        delete: operations["deleteMcpServersByName"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/mcp-servers": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the environment's own MCP server registrations */
        get: operations["getEnvironmentsByIdMcpServers"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/mcp-servers/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get an environment's MCP server registration */
        get: operations["getEnvironmentsByIdMcpServersByName"];
        /** Register (201) or replace (200) an MCP server for this environment (overrides the developer's of the same name) */
        put: operations["putEnvironmentsByIdMcpServersByName"];
        post?: never;
        /** Remove an environment's MCP server registration */
        delete: operations["deleteEnvironmentsByIdMcpServersByName"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/webhook-endpoint": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The webhook endpoint (404 when none is set) */
        get: operations["getWebhookEndpoint"];
        /** Set the webhook URL (the first set answers the signing secret, once) */
        put: operations["putWebhookEndpoint"];
        post?: never;
        /** Remove the webhook endpoint */
        delete: operations["deleteWebhookEndpoint"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/webhook-endpoint/rotate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Rotate the signing secret (the old one signs for 24 more hours) */
        post: operations["postWebhookEndpointRotate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/webhook-deliveries": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Delivery attempts, newest first */
        get: operations["getWebhookDeliveries"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/test-clock/advance": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Move the service clock forward and run what became due (only with GATEWAY_TEST_CLOCK=1; otherwise 404 no such route) */
        post: operations["postTestClockAdvance"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/policy": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The developer's default policy */
        get: operations["getPolicy"];
        /** Set the developer's default policy */
        put: operations["putPolicy"];
        post?: never;
        /** Remove the developer's default policy */
        delete: operations["deletePolicy"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/policy/simulate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Simulate draft rules on the requests the audit log recorded: what would change; nothing is stored
         * @description Evaluates the newest `limit` (default 1,000, at most 10,000) recorded requests that reached the policy, grants ignored; answers how many were evaluated, how many would change, the transitions ("allow->ask": n) and at most 50 examples, newest first.
         */
        post: operations["postPolicySimulate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/policy": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The environment's effective policy (its own, the developer's, or the default) */
        get: operations["getEnvironmentsByIdPolicy"];
        /** Set the environment's policy */
        put: operations["putEnvironmentsByIdPolicy"];
        post?: never;
        /** Remove the environment's policy (the developer default applies) */
        delete: operations["deleteEnvironmentsByIdPolicy"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/policy/check": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** What the gateway would decide for a connector and category, grants included */
        post: operations["postEnvironmentsByIdPolicyCheck"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/approvals": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List approval requests, newest first */
        get: operations["getApprovals"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/approvals/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get an approval request */
        get: operations["getApprovalsById"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/grants": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List grants in effect */
        get: operations["getGrants"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/grants/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Revoke a grant */
        delete: operations["deleteGrantsById"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/audit-log": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Audit entries, one per proxied request */
        get: operations["getAuditLog"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/audit-log/verify": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Check the audit log's hash chain */
        get: operations["getAuditLogVerify"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/oauth-clients": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The OAuth apps, one entry per provider (google, slack) */
        get: operations["getOauthClients"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/oauth-clients/{provider}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /** Register the developer's own OAuth app for a provider */
        put: operations["putOauthClientsByProvider"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/connections/authorize": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** An authorization link for an end user to connect an account */
        post: operations["postConnectionsAuthorize"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/connections": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Connections, newest first, at most 500 */
        get: operations["getConnections"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/connections/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a connection */
        get: operations["getConnectionsById"];
        put?: never;
        post?: never;
        /** Revoke a connection (idempotent) */
        delete: operations["deleteConnectionsById"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/environments/{id}/stand-in-tokens": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The stand-in tokens this environment's VM receives */
        get: operations["getEnvironmentsByIdStandInTokens"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/team-members": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List team members */
        get: operations["getTeamMembers"];
        put?: never;
        /** Add a console team member (answers a one-time sign-in link) */
        post: operations["postTeamMembers"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/team-members/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Remove a team member */
        delete: operations["deleteTeamMembersById"];
        options?: never;
        head?: never;
        /** Update a team member: name, and the Slack user id whose card presses decide as this member (null unlinks) */
        patch: operations["patchTeamMembersById"];
        trace?: never;
    };
    "/v1/approval-channels/slack": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The Slack approval channel (404 when none is set; never its secrets) */
        get: operations["getApprovalChannelsSlack"];
        /** Set the Slack approval channel (bot token and signing secret are sealed, never returned) */
        put: operations["putApprovalChannelsSlack"];
        post?: never;
        /** Remove the Slack approval channel (no further cards or card updates) */
        delete: operations["deleteApprovalChannelsSlack"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/browser/leases/{id}/cdp": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The lease's Chrome DevTools Protocol endpoint (WebSocket; the lease's cdp_url, for chromium.connectOverCDP) */
        get: operations["getBrowserLeasesByIdCdp"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/browser/view/{token}/ws": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The takeover viewer's WebSocket (opening it consumes the token) */
        get: operations["getBrowserViewByTokenWs"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** @description Every error: {error, message}, plus environment_id where docs/errors.md says so */
        Error: {
            /** @description A stable code of docs/errors.md */
            error: string;
            /** @description For people; may change */
            message: string;
            /** @description With environment_exists and idempotency_key_reused */
            environment_id?: string;
        };
        Health: {
            /** @enum {unknown} */
            status: "ok";
        };
        Readiness: {
            /** @enum {unknown} */
            status: "ready" | "not_ready";
            checks: {
                [key: string]: "ok" | "failing";
            };
        };
        Approval: {
            id: string;
            environment_id: string;
            connector: string;
            category: string;
            summary: string;
            task_id: string | null;
            session_id: string | null;
            /** @enum {unknown} */
            max_scope: "once" | "task" | "session" | "time_limited" | "permanent";
            /** @enum {unknown} */
            status: "pending" | "approved" | "denied" | "expired";
            scope: string | null;
            /** @enum {unknown} */
            decided_via: "signature" | "api_key" | "console" | "slack" | null;
            /** Format: date-time */
            decided_at: string | null;
            /** Format: date-time */
            expires_at: string;
            /** Format: date-time */
            created_at: string;
            grant_id: string | null;
            /** @description Only on an MCP tool call (issue 28): the tool it calls (a batch's tools joined with ,) */
            tool?: string;
        };
        /** @description A page: pass next as after */
        EnvironmentPage: {
            data: components["schemas"]["Environment"][];
            next: string | null;
        };
        Environment: {
            id: string;
            end_user_id: string;
            agent_version: string | null;
            /** @enum {unknown} */
            desired_state: "running" | "suspended" | "stopped" | "destroyed";
            /** @description What the host reports: pending, starting, running, suspended, stopped, failed, destroyed, ... */
            state: string;
            /** Format: date-time */
            last_active_at: string | null;
            idle: {
                suspend_after_secs: number;
                stop_after_secs: number;
                /** Format: date-time */
                keep_awake_until: string | null;
                /** @enum {unknown} */
                next_step: "suspend" | "stop" | null;
                /** Format: date-time */
                next_step_at: string | null;
            };
            resources: {
                cpus: number;
                memory_mib: number;
                base_memory_mib: number;
                disk_gib: number;
            };
            template: string | null;
            host_id: string | null;
            failure_reason: string | null;
            limit_exceeded: boolean;
            /** Format: date-time */
            created_at: string | null;
            /** Format: date-time */
            updated_at: string | null;
        };
        /** @description One result per item, in request order: {environment} or an error */
        EnvironmentBatchResult: {
            data: ({
                environment: components["schemas"]["Environment"];
            } | components["schemas"]["Error"])[];
        };
        Configuration: {
            env: {
                [key: string]: string;
            };
            files: {
                [key: string]: {
                    content: string;
                    /** @enum {unknown} */
                    encoding: "utf8" | "base64";
                };
            };
        };
        /** @description Events ascending by id; next is the last id when the page is full */
        EnvironmentEventPage: {
            data: components["schemas"]["EnvironmentEvent"][];
            next: number | null;
        };
        EnvironmentEvent: {
            id: number;
            environment_id: string;
            kind: string;
            /** @enum {unknown} */
            source: "api" | "agent" | "system" | "host";
            data: {
                [key: string]: unknown;
            };
            /** Format: date-time */
            created_at: string | null;
        };
        Wakeup: {
            id: string;
            environment_id: string;
            /** Format: date-time */
            at: string | null;
            reason: string | null;
            /** @enum {unknown} */
            status: "pending" | "fired" | "cancelled";
            /** Format: date-time */
            created_at: string | null;
        };
        /** @description A page: pass next as after */
        WakeupPage: {
            data: components["schemas"]["Wakeup"][];
            next: string | null;
        };
        /** @description A page: pass next as after */
        SchedulePage: {
            data: components["schemas"]["Schedule"][];
            next: string | null;
        };
        Schedule: {
            id: string;
            key: string;
            cron: string | null;
            tz: string | null;
            /** Format: date-time */
            at: string | null;
            source: string;
            /** Format: date-time */
            next_run_at: string | null;
            /** Format: date-time */
            created_at: string | null;
        };
        AgentSettings: {
            scheduling: boolean;
            max_schedules: number;
            min_interval_secs: number;
            keep_awake_max_secs: number;
            keep_awake_daily_secs: number;
        };
        Template: {
            id: string;
            name: string;
            version: string;
            ref: string;
            /** @enum {unknown} */
            status: "building" | "ready" | "failed";
            /** Format: date-time */
            created_at: string | null;
            /** Format: date-time */
            updated_at: string | null;
        };
        /** @description A page: pass next as after */
        TemplatePage: {
            data: components["schemas"]["Template"][];
            next: string | null;
        };
        ExecResult: {
            /** @description 128 + the signal number for a killed command */
            exit_code: number | null;
            stdout: string;
            stderr: string;
            duration_ms: number;
            stdout_truncated: boolean;
            stderr_truncated: boolean;
        };
        FileWritten: {
            path: string;
            size: number;
        };
        FileContent: {
            path: string;
            /** @description base64 */
            content: string;
            /** @enum {unknown} */
            encoding: "base64";
            size: number;
        };
        HostList: {
            data: components["schemas"]["Host"][];
        };
        Host: {
            id: string;
            name: string;
            driver: string;
            status: string;
            /** @description Placement puts nothing new here; what runs keeps running (`gateway hosts drain`) */
            draining: boolean;
            capacity: {
                cpus: number;
                memory_mib: number;
            };
            /** @description The host's measured isolation */
            capabilities: unknown;
            /** Format: date-time */
            last_heartbeat_at: string;
        };
        Usage: {
            period: string;
            /** Format: date-time */
            period_start: string | null;
            /** Format: date-time */
            period_end: string | null;
            running_seconds: number;
            limit: {
                running_seconds: number;
            } | null;
            limit_exceeded: boolean;
        };
        AgentVersionDefault: {
            default_version: string | null;
        };
        Rollout: {
            id: string;
            version: string;
            /** @enum {unknown} */
            status: "running" | "completed";
            upgraded: number;
            remaining: number;
            /** Format: date-time */
            created_at: string | null;
            /** Format: date-time */
            completed_at: string | null;
        };
        RolloutList: {
            data: components["schemas"]["Rollout"][];
        };
        /** @description A page: pass next as after */
        BrowserProfilePage: {
            data: components["schemas"]["BrowserProfile"][];
            next: string | null;
        };
        BrowserProfile: {
            id: string;
            end_user_id: string;
            name: string;
            version: number;
            /** Format: date-time */
            created_at: string | null;
            /** Format: date-time */
            updated_at: string | null;
        };
        /** @description A page: pass next as after */
        BrowserLeasePage: {
            data: components["schemas"]["BrowserLease"][];
            next: string | null;
        };
        BrowserLease: {
            id: string;
            environment_id: string;
            profile_id: string | null;
            /** @enum {unknown} */
            mode: "read" | "write" | "clean";
            /** @enum {unknown} */
            state: "pending" | "active" | "releasing" | "released" | "expired";
            /** Format: date-time */
            expires_at: string | null;
            /** @enum {unknown} */
            save_outcome: "saved" | "discarded" | null;
            taken_over: boolean;
            /** @description For chromium.connectOverCDP, while active */
            cdp_url: string | null;
            vm_cdp_url: string | null;
            /** Format: date-time */
            created_at: string | null;
        };
        BrowserTakeover: {
            view_url: string;
            /** Format: date-time */
            expires_at: string | null;
        };
        BrowserLimits: {
            per_developer: number;
            per_end_user: number;
            lease_secs: number;
            save_deadline_secs: number;
        };
        GatewayAccess: {
            /** @description http://<environment id>:<password>@host:port */
            proxy_url: string;
            ca_cert_pem: string;
        };
        SecretList: {
            data: components["schemas"]["Secret"][];
        };
        /** @description A secret as the API shows it: never its value */
        Secret: {
            name: string;
            /** @description What the agent sends in place of the value; the gateway swaps it */
            placeholder: string;
            allowed_hosts: string[];
            infrastructure: boolean;
            inject?: string[];
            /** @enum {unknown} */
            allow_minting?: true;
            /** Format: date-time */
            created_at: string | null;
        };
        EnvironmentEgress: {
            allow: string[] | null;
            /** @enum {unknown} */
            source: "environment" | "developer" | "none";
            effective: string[];
            /**
             * @description A host off effective: refused (deny) or held for approval (ask)
             * @enum {unknown}
             */
            unknown_hosts: "deny" | "ask";
        };
        DeveloperEgress: {
            allow: string[];
        };
        McpServerList: {
            data: components["schemas"]["McpServer"][];
        };
        McpServer: {
            name: string;
            /** @description The server's Streamable HTTP endpoint */
            url: string;
            /** @description The secret swapped in as its bearer token, or null */
            secret: string | null;
            tools: {
                [key: string]: "read" | "write" | "send" | "delete" | "pay" | "change_permission";
            };
            /** @enum {unknown} */
            default_category: "read" | "write" | "send" | "delete" | "pay" | "change_permission" | null;
            /** @description The policy connector of its requests: mcp:<name> */
            connector: string;
            /** Format: date-time */
            created_at: string | null;
            /** Format: date-time */
            updated_at: string | null;
        };
        WebhookEndpoint: {
            url: string;
            /** @description Only in the answer to the PUT that created the endpoint: the signing secret, shown once */
            secret?: string;
            secret_prefix: string;
            /** Format: date-time */
            previous_secret_expires_at: string | null;
        };
        WebhookSecretRotation: {
            /** @description The new signing secret, shown once */
            secret: string;
            /**
             * Format: date-time
             * @description The old secret keeps signing until then (24 hours)
             */
            previous_secret_expires_at: string;
        };
        /** @description A page: pass next as after */
        WebhookDeliveryPage: {
            data: components["schemas"]["WebhookDelivery"][];
            next: string | null;
        };
        WebhookDelivery: {
            id: string;
            event_id: string;
            event_type: string | null;
            url: string | null;
            /** Format: date-time */
            attempted_at: string;
            /** @enum {unknown} */
            status: "succeeded" | "failed";
            status_code: number | null;
            error: string | null;
            duration_ms: number;
            /** Format: date-time */
            next_attempt_at: string | null;
        };
        TestClock: {
            /** Format: date-time */
            now: string;
        };
        Policy: {
            rules: components["schemas"]["PolicyRule"][];
            /** @enum {unknown} */
            source: "environment" | "developer" | "default";
        };
        PolicyRule: {
            /** @description Omitted: every connector (gmail, calendar, slack, secret:<NAME>, ...) */
            connector?: string;
            /**
             * @description Omitted: every category
             * @enum {unknown}
             */
            category?: "read" | "write" | "send" | "delete" | "pay" | "change_permission";
            /** @enum {unknown} */
            effect: "allow" | "deny" | "ask";
            /**
             * @description Only on ask rules; omitted: permanent
             * @enum {unknown}
             */
            max_scope?: "once" | "task" | "session" | "time_limited" | "permanent";
            when?: components["schemas"]["PolicyConditions"];
            /** @description An MCP tool (issue 28): the rule matches only requests calling exactly this tool */
            tool?: string;
        };
        /** @description Conditions (issue 26): the rule matches only when every one holds; what cannot be read takes the riskier reading */
        PolicyConditions: {
            /** @description The decoded amount in this currency is greater */
            amount_over?: {
                currency: string;
                minor_units: number;
            };
            /** @description Some recipient is outside these domains (subdomains included) */
            recipients_outside?: string[];
            /** @description The Slack channel is not one of these */
            channels_outside?: string[];
            /** @description max requests of the rule's connector and category were already forwarded in the rolling window */
            count_over?: {
                max: number;
                /** @enum {unknown} */
                per: "hour" | "day";
                /**
                 * @description Omitted: environment
                 * @enum {unknown}
                 */
                scope?: "environment" | "end_user";
            };
        };
        PolicySimulation: {
            /** @description Recorded requests evaluated (those that reached the policy: a connector and a category) */
            evaluated: number;
            /** @description Of those, how many the draft would decide differently */
            changed: number;
            /** @description "<was>-><would_be>" → how many; changed pairs only */
            transitions: {
                [key: string]: number;
            };
            /** @description At most 50 changed requests, newest first */
            examples: components["schemas"]["PolicySimulationExample"][];
        };
        PolicySimulationExample: {
            audit_id: string;
            method: string;
            host: string;
            path: string;
            connector: string;
            category: string;
            /** @enum {unknown} */
            was: "allow" | "ask" | "deny";
            /** @enum {unknown} */
            would_be: "allow" | "ask" | "deny";
            matched_rules: number[];
        };
        PolicyCheck: {
            /** @enum {unknown} */
            decision: "allow" | "ask" | "deny";
            reason: string;
            matched_rules: number[];
            /**
             * @description Only when decision is ask
             * @enum {unknown}
             */
            max_scope?: "once" | "task" | "session" | "time_limited" | "permanent";
            grant: components["schemas"]["Grant"] | null;
            /** @enum {unknown} */
            source: "environment" | "developer" | "default";
        };
        Grant: {
            id: string;
            environment_id: string;
            connector: string;
            category: string;
            /** @enum {unknown} */
            scope: "task" | "session" | "time_limited" | "permanent";
            task_id: string | null;
            session_id: string | null;
            /** Format: date-time */
            expires_at: string | null;
            approval_id: string;
            /** Format: date-time */
            created_at: string;
            /** @description The decision's limits (currency lower-cased), or null: a grant without limits */
            limits: {
                per_request_minor_units?: number;
                total_minor_units?: number;
                currency?: string;
                max_uses?: number;
                recipients_within?: string[];
            } | null;
            /** @description Spent by requests under the grant, the approved one first; counted only on a grant with limits */
            used: {
                minor_units: number;
                uses: number;
            };
            /** @description Only on a grant of an MCP tool call (issue 28): it covers calls of this tool only (a batch's tools joined with ,) */
            tool?: string;
        };
        /** @description A page: pass next as after */
        ApprovalPage: {
            data: components["schemas"]["Approval"][];
            next: string | null;
        };
        /** @description A page: pass next as after */
        GrantPage: {
            data: components["schemas"]["Grant"][];
            next: string | null;
        };
        /** @description A page: pass next as after */
        AuditEntryPage: {
            data: components["schemas"]["AuditEntry"][];
            next: string | null;
        };
        AuditEntry: {
            id: string;
            /** Format: date-time */
            created_at: string | null;
            environment_id: string | null;
            method: string;
            host: string;
            path: string;
            connector: string | null;
            category: string | null;
            /** @enum {unknown} */
            credential: "connection" | "secret" | "none";
            /** @enum {unknown} */
            decision: "allow" | "deny" | "ask";
            reason: string | null;
            matched_rules: unknown;
            approval_id: string | null;
            grant_id: string | null;
            status: number;
            upstream_status: number | null;
            bytes_in: number;
            bytes_out: number;
            duration_ms: number;
            /** @enum {unknown} */
            redacted?: true;
            /** @description Present only when the request's facts were recorded; null when the stored value does not parse */
            facts?: {
                amount?: {
                    currency: string;
                    minor_units: number;
                } | null;
                /** @description At most 50; recipients_total says how many there were when more */
                recipients?: string[] | null;
                recipients_total?: number;
                channel?: string | null;
            } | null;
            /** @description Only on a request that called an MCP tool (issue 28) */
            tool?: string;
            prev_hash: string;
            hash: string;
        };
        AuditVerify: {
            ok: boolean;
            checked: number;
            first_broken_id: string | null;
            checked_from: string | null;
        };
        OAuthClientList: {
            data: components["schemas"]["OAuthClient"][];
        };
        OAuthClient: {
            provider: string;
            client_id: string | null;
            platform_app_available: boolean;
            redirect_uri: string;
        };
        AuthorizationLink: {
            url: string;
            /** Format: date-time */
            expires_at: string;
        };
        ConnectionList: {
            data: components["schemas"]["Connection"][];
            has_more: boolean;
        };
        Connection: {
            id: string;
            provider: string;
            end_user_id: string;
            account: string | null;
            connectors: string[];
            /** @enum {unknown} */
            status: "active" | "error" | "revoked";
            /** Format: date-time */
            created_at: string | null;
            /** Format: date-time */
            revoked_at: string | null;
        };
        StandInTokenList: {
            data: components["schemas"]["StandInToken"][];
        };
        StandInToken: {
            connector: string;
            connection_id: string;
            token: string;
        };
        CreatedTeamMember: {
            id: string;
            email: string;
            name: string;
            slack_user_id: string | null;
            /** Format: date-time */
            created_at: string | null;
            /** @description One-time sign-in link of the console, shown once, valid 24 hours */
            sign_in_url: string;
        };
        TeamMemberList: {
            data: components["schemas"]["TeamMember"][];
        };
        TeamMember: {
            id: string;
            email: string;
            name: string;
            /** @description Slack user id: presses of Slack approval cards by this user decide as this member */
            slack_user_id: string | null;
            /** Format: date-time */
            created_at: string | null;
        };
        /** @description The Slack approval channel (docs/slack-approvals.md): never the bot token or the signing secret */
        SlackApprovalChannel: {
            /** @enum {unknown} */
            type: "slack";
            channel_id: string;
            api_base_url: string;
            /** Format: date-time */
            created_at: string;
            /** Format: date-time */
            updated_at: string;
        };
    };
    responses: {
        /** @description `already_decided`: The approval request was already decided or has expired */
        already_decided: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "already_decided";
                };
            };
        };
        /** @description `environment_destroyed`: The environment is destroyed (config, idle, wakeups, browser lease) */
        environment_destroyed: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "environment_destroyed";
                };
            };
        };
        /**
         * @description `environment_destroyed`: The environment is destroyed (config, idle, wakeups, browser lease)
         *
         *     `profile_locked`: A second write lease on a profile
         */
        "environment_destroyed-profile_locked": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "environment_destroyed" | "profile_locked";
                };
            };
        };
        /**
         * @description `environment_exists`: The end user already has a non-destroyed environment; carries environment_id
         *
         *     `idempotency_key_reused`: The Idempotency-Key was used for a different end user; carries environment_id
         *
         *     `template_not_ready`: The template version is not ready
         */
        "environment_exists-idempotency_key_reused-template_not_ready": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "environment_exists" | "idempotency_key_reused" | "template_not_ready";
                };
            };
        };
        /**
         * @description `environment_failed`: exec or file call on a failed environment
         *
         *     `environment_destroyed`: The environment is destroyed (config, idle, wakeups, browser lease)
         *
         *     `limit_exceeded`: resume, wake or exec after a usage limit suspended the environment
         */
        "environment_failed-environment_destroyed-limit_exceeded": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "environment_failed" | "environment_destroyed" | "limit_exceeded";
                };
            };
        };
        /**
         * @description `exec_failed`: Process could not be started in the VM
         *
         *     `exec_timeout`: A synchronous exec did not finish within its timeout
         *
         *     `environment_not_placed`: Not placed on a host within 15 seconds
         *
         *     `environment_not_running`: Not up within 90 seconds
         *
         *     `host_unavailable`: Host offline
         *
         *     `guest_unavailable`: VM cannot be reached or disconnected midway
         */
        "exec_failed-exec_timeout-environment_not_placed-environment_not_running-host_unavailable-guest_unavailable": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "exec_failed" | "exec_timeout" | "environment_not_placed" | "environment_not_running" | "host_unavailable" | "guest_unavailable";
                };
            };
        };
        /**
         * @description `file_operation_failed`: A file operation hit an unexpected error
         *
         *     `environment_not_placed`: Not placed on a host within 15 seconds
         *
         *     `environment_not_running`: Not up within 90 seconds
         *
         *     `host_unavailable`: Host offline
         *
         *     `guest_unavailable`: VM cannot be reached or disconnected midway
         */
        "file_operation_failed-environment_not_placed-environment_not_running-host_unavailable-guest_unavailable": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "file_operation_failed" | "environment_not_placed" | "environment_not_running" | "host_unavailable" | "guest_unavailable";
                };
            };
        };
        /** @description `host_unavailable`: Host offline */
        host_unavailable: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "host_unavailable";
                };
            };
        };
        /** @description `invalid_body`: The body's shape is wrong: a missing field, a wrong type, a value outside an enum, an unknown field, or a batch of 0 or more than 200 items */
        invalid_body: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "invalid_body";
                };
            };
        };
        /** @description `invalid_request`: A value of the right shape breaks a rule (range, length, format, cross-field), or the JSON body or query string cannot be parsed */
        invalid_request: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "invalid_request";
                };
            };
        };
        /**
         * @description `invalid_request`: A value of the right shape breaks a rule (range, length, format, cross-field), or the JSON body or query string cannot be parsed
         *
         *     `invalid_decision`: The decision body is not a valid decision
         *
         *     `missing_scope`: approve without a scope, or a task or session scope with an empty id
         *
         *     `invalid_scope`: task_id or session_id does not match the request's own, or `until` is not in the future
         */
        "invalid_request-invalid_decision-missing_scope-invalid_scope": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "invalid_request" | "invalid_decision" | "missing_scope" | "invalid_scope";
                };
            };
        };
        /** @description `invalid_signature`: Signed callback with a missing or wrong signature */
        invalid_signature: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "invalid_signature";
                };
            };
        };
        /** @description `invalid_state_transition`: The move is not allowed from the environment's desired state (suspend on stopped or destroyed, resume or wake on destroyed) */
        invalid_state_transition: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "invalid_state_transition";
                };
            };
        };
        /**
         * @description `invalid_state_transition`: The move is not allowed from the environment's desired state (suspend on stopped or destroyed, resume or wake on destroyed)
         *
         *     `limit_exceeded`: resume, wake or exec after a usage limit suspended the environment
         */
        "invalid_state_transition-limit_exceeded": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "invalid_state_transition" | "limit_exceeded";
                };
            };
        };
        /** @description `lease_limit_reached`: Browser lease concurrency limit (a count, not a rate) */
        lease_limit_reached: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "lease_limit_reached";
                };
            };
        };
        /** @description `lease_not_active`: renew, takeover, handback or release in a state that forbids it */
        lease_not_active: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "lease_not_active";
                };
            };
        };
        /**
         * @description `lease_not_active`: renew, takeover, handback or release in a state that forbids it
         *
         *     `not_taken_over`: handback on a lease not taken over
         */
        "lease_not_active-not_taken_over": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "lease_not_active" | "not_taken_over";
                };
            };
        };
        /** @description `member_exists`: A team member with this email already exists for the developer */
        member_exists: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "member_exists";
                };
            };
        };
        /** @description `no_oauth_client`: Authorize without a registered app or platform test app */
        no_oauth_client: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "no_oauth_client";
                };
            };
        };
        /** @description `not_found`: No such resource (missing or another developer's), or no such route */
        not_found: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "not_found";
                };
            };
        };
        /** @description `payload_too_large`: A held or scanned request body is larger than the gateway buffers */
        payload_too_large: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "payload_too_large";
                };
            };
        };
        /** @description `profile_exists`: Browser profile name not unique per end user */
        profile_exists: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "profile_exists";
                };
            };
        };
        /** @description `profile_in_use`: Deleting a profile used by a pending, active or releasing lease */
        profile_in_use: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "profile_in_use";
                };
            };
        };
        /** @description `rollout_in_progress`: An agent version rollout is already running for this developer */
        rollout_in_progress: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "rollout_in_progress";
                };
            };
        };
        /** @description `scope_too_wide`: The scope is wider than the request's max_scope */
        scope_too_wide: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "scope_too_wide";
                };
            };
        };
        /** @description `template_exists`: A template with that name and version already exists */
        template_exists: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "template_exists";
                };
            };
        };
        /** @description `unauthorized`: Missing, malformed, unknown or revoked API key */
        unauthorized: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "unauthorized";
                };
            };
        };
        /**
         * @description `unauthorized`: Missing, malformed, unknown or revoked API key
         *
         *     `invalid_signature`: Signed callback with a missing or wrong signature
         */
        "unauthorized-invalid_signature": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "unauthorized" | "invalid_signature";
                };
            };
        };
        /** @description `unsupported_media_type`: A request with a body lacks Content-Type: application/json */
        unsupported_media_type: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "unsupported_media_type";
                };
            };
        };
        /** @description `wakeup_limit_reached`: More than 100 pending wakeups */
        wakeup_limit_reached: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"] & {
                    /** @enum {unknown} */
                    error?: "wakeup_limit_reached";
                };
            };
        };
    };
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    getHealthz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Health"];
                };
            };
            400: components["responses"]["invalid_request"];
        };
    };
    getReadyz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Readiness"];
                };
            };
            400: components["responses"]["invalid_request"];
            /** @description Not ready */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Readiness"];
                };
            };
        };
    };
    getMetrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The Prometheus text exposition */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    postApprovalsByIdDecision: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The approval request id, apr_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @enum {unknown} */
                    decision: "approve" | "deny";
                    /** @description Required to approve; none on deny */
                    scope?: {
                        /** @enum {unknown} */
                        kind: "once" | "task" | "session" | "until" | "permanent";
                        /** @description kind task: the request's own task id */
                        task_id?: string;
                        /** @description kind session: the request's own session id */
                        session_id?: string;
                        /** @description kind until: Unix seconds, in the future */
                        until?: number;
                    } | null;
                    /** @description Spending mandate (approve with a scope other than once): the grant covers only requests within these; the approved request must be within them and is the first use */
                    limits?: {
                        /** @description No single request above this amount (minor units of currency) */
                        per_request_minor_units?: number;
                        /** @description All requests under the grant together, the approved one first, at most this */
                        total_minor_units?: number;
                        /** @description ISO 4217; required with an amount limit, only with one */
                        currency?: string;
                        /** @description At most this many requests, the approved one first */
                        max_uses?: number;
                        /** @description Every recipient's domain is one of these or a subdomain */
                        recipients_within?: string[];
                    } | null;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Approval"];
                };
            };
            400: components["responses"]["invalid_request-invalid_decision-missing_scope-invalid_scope"];
            401: components["responses"]["unauthorized-invalid_signature"];
            403: components["responses"]["scope_too_wide"];
            404: components["responses"]["not_found"];
            409: components["responses"]["already_decided"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    postSlackInteractivity: {
        parameters: {
            query?: never;
            header: {
                /** @description Unix seconds when Slack sent the request */
                "X-Slack-Request-Timestamp": string;
                /** @description v0=<hex HMAC-SHA256 of "v0:{timestamp}:{body}" with the signing secret> */
                "X-Slack-Signature": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": unknown;
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["invalid_signature"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
        };
    };
    getOauthByProviderCallback: {
        parameters: {
            query?: {
                state?: string;
                code?: string;
                error?: string;
            };
            header?: never;
            path: {
                /** @description google or slack */
                provider: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description To the return_url with status=ok&connection_id=... or status=error&error=... */
            302: {
                headers: {
                    /** @description The developer's return_url */
                    Location?: string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            /**
             * @description A page saying the link is missing, unknown, expired or used
             *
             *     `invalid_request`: A value of the right shape breaks a rule (range, length, format, cross-field), or the JSON body or query string cannot be parsed
             */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"] & {
                        /** @enum {unknown} */
                        error?: "invalid_request";
                    };
                    "text/html": string;
                };
            };
            /**
             * @description Unknown provider (a page)
             *
             *     `not_found`: No such resource (missing or another developer's), or no such route
             */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"] & {
                        /** @enum {unknown} */
                        error?: "not_found";
                    };
                    "text/html": string;
                };
            };
        };
    };
    getBrowserViewByToken: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The viewer token of the takeover's view_url */
                token: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The viewer (HTML) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/html": string;
                };
            };
            400: components["responses"]["invalid_request"];
            404: components["responses"]["not_found"];
        };
    };
    getOpenapiJson: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The OpenAPI 3.1 document */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            400: components["responses"]["invalid_request"];
        };
    };
    getEnvironments: {
        parameters: {
            query?: {
                /** @description Items per page, 1 to 200 (clamped); default 50. Not an integer: 400 */
                limit?: number;
                /** @description The `next` of the previous page; an id not in the list gives an empty page */
                after?: string;
                /** @description Only environments in this state (not validated) */
                state?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EnvironmentPage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    postEnvironments: {
        parameters: {
            query?: never;
            header?: {
                /** @description 1 to 255 visible ASCII characters; a retry with the same key returns the original with 200 */
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    end_user_id: string;
                    agent_version?: string | null;
                    resources?: {
                        cpus?: number;
                        memory_mib?: number;
                        base_memory_mib?: number;
                        disk_gib?: number;
                    };
                    idle?: {
                        suspend_after_secs?: number;
                        stop_after_secs?: number;
                    };
                    env?: {
                        [key: string]: string;
                    };
                    files?: {
                        [key: string]: string | {
                            content: string;
                            /** @enum {unknown} */
                            encoding?: "utf8" | "base64";
                        };
                    };
                    secrets?: {
                        [key: string]: {
                            value: string;
                            allowed_hosts: string[];
                            infrastructure?: boolean;
                            inject?: string[] | null;
                            allow_minting?: boolean;
                        };
                    };
                    egress_allow?: string[];
                    template?: string | null;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Environment"];
                };
            };
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Environment"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            409: components["responses"]["environment_exists-idempotency_key_reused-template_not_ready"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    postEnvironmentsBatch: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    environments: {
                        end_user_id: string;
                        agent_version?: string | null;
                        resources?: {
                            cpus?: number;
                            memory_mib?: number;
                            base_memory_mib?: number;
                            disk_gib?: number;
                        };
                        idle?: {
                            suspend_after_secs?: number;
                            stop_after_secs?: number;
                        };
                        env?: {
                            [key: string]: string;
                        };
                        files?: {
                            [key: string]: string | {
                                content: string;
                                /** @enum {unknown} */
                                encoding?: "utf8" | "base64";
                            };
                        };
                        secrets?: {
                            [key: string]: {
                                value: string;
                                allowed_hosts: string[];
                                infrastructure?: boolean;
                                inject?: string[] | null;
                                allow_minting?: boolean;
                            };
                        };
                        egress_allow?: string[];
                        template?: string | null;
                    }[];
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EnvironmentBatchResult"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getEnvironmentsById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Environment"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    deleteEnvironmentsById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Environment"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    postEnvironmentsByIdSuspend: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Environment"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["invalid_state_transition"];
        };
    };
    postEnvironmentsByIdResume: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Environment"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["invalid_state_transition-limit_exceeded"];
        };
    };
    postEnvironmentsByIdWake: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Environment"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["invalid_state_transition-limit_exceeded"];
        };
    };
    postEnvironmentsByIdKeepAwake: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    seconds: number;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Environment"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["invalid_state_transition-limit_exceeded"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    patchEnvironmentsByIdResources: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    cpus?: number;
                    memory_mib?: number;
                    base_memory_mib?: number;
                    disk_gib?: number;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Environment"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_destroyed"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    patchEnvironmentsByIdIdle: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    suspend_after_secs?: number;
                    stop_after_secs?: number;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Environment"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_destroyed"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getEnvironmentsByIdConfig: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Configuration"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    putEnvironmentsByIdConfig: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    env?: {
                        [key: string]: string;
                    };
                    files?: {
                        [key: string]: string | {
                            content: string;
                            /** @enum {unknown} */
                            encoding?: "utf8" | "base64";
                        };
                    };
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Configuration"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_destroyed"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getEnvironmentsByIdEvents: {
        parameters: {
            query?: {
                /** @description An event id (an integer); not an integer: 400 */
                after?: string;
                /** @description 1 to 200 (clamped); default 100 */
                limit?: number;
                /** @description Only events of this kind */
                kind?: string;
            };
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EnvironmentEventPage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getEnvironmentsByIdWakeups: {
        parameters: {
            query?: {
                /** @description Items per page, 1 to 200 (clamped); default 50. Not an integer: 400 */
                limit?: number;
                /** @description The `next` of the previous page; an id not in the list gives an empty page */
                after?: string;
            };
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WakeupPage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    postEnvironmentsByIdWakeups: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    at: string;
                    reason?: string | null;
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Wakeup"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_destroyed"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
            429: components["responses"]["wakeup_limit_reached"];
        };
    };
    deleteEnvironmentsByIdWakeupsByWakeupId: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
                wakeupId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description No Content */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getEnvironmentsByIdSchedules: {
        parameters: {
            query?: {
                /** @description Items per page, 1 to 200 (clamped); default 50. Not an integer: 400 */
                limit?: number;
                /** @description The `next` of the previous page; an id not in the list gives an empty page */
                after?: string;
            };
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SchedulePage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    deleteEnvironmentsByIdSchedulesByKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description No Content */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getEnvironmentsByIdAgentSettings: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AgentSettings"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    patchEnvironmentsByIdAgentSettings: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    scheduling?: boolean;
                    max_schedules?: number;
                    min_interval_secs?: number;
                    keep_awake_max_secs?: number;
                    keep_awake_daily_secs?: number;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AgentSettings"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_destroyed"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getTemplates: {
        parameters: {
            query?: {
                /** @description Items per page, 1 to 200 (clamped); default 50. Not an integer: 400 */
                limit?: number;
                /** @description The `next` of the previous page; an id not in the list gives an empty page */
                after?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TemplatePage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    postTemplates: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    name: string;
                    version: string;
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Template"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            409: components["responses"]["template_exists"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getTemplatesById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The template id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Template"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    postTemplatesByIdReady: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The template id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Template"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    postTemplatesByIdFailed: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The template id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Template"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    postEnvironmentsByIdExec: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    command: string[];
                    cwd?: string;
                    env?: {
                        [key: string]: string;
                    };
                    stdin?: string;
                    timeout_secs?: number;
                };
            };
        };
        responses: {
            /** @description The command ended (JSON), or the event stream: events stdout and stderr {data}, then exit {exit_code, duration_ms, timed_out} (or error {error, message}) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ExecResult"];
                    "text/event-stream": string;
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_failed-environment_destroyed-limit_exceeded"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
            503: components["responses"]["exec_failed-exec_timeout-environment_not_placed-environment_not_running-host_unavailable-guest_unavailable"];
        };
    };
    getEnvironmentsByIdFiles: {
        parameters: {
            query: {
                /** @description Absolute, or relative to /home/agent */
                path: string;
            };
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FileContent"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_failed-environment_destroyed-limit_exceeded"];
            503: components["responses"]["file_operation_failed-environment_not_placed-environment_not_running-host_unavailable-guest_unavailable"];
        };
    };
    putEnvironmentsByIdFiles: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    path: string;
                    content: string;
                    /**
                     * @default utf8
                     * @enum {unknown}
                     */
                    encoding?: "utf8" | "base64";
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FileWritten"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_failed-environment_destroyed-limit_exceeded"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
            503: components["responses"]["file_operation_failed-environment_not_placed-environment_not_running-host_unavailable-guest_unavailable"];
        };
    };
    getHosts: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HostList"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    getUsage: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Usage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    putUsageLimit: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    running_seconds: number;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Usage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    deleteUsageLimit: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Usage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    getAgentVersion: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AgentVersionDefault"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    putAgentVersion: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    default_version: string | null;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AgentVersionDefault"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    postEnvironmentsByIdAgentUpgrade: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    version: string;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Environment"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_destroyed"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getAgentRollouts: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RolloutList"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    postAgentRollouts: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    version: string;
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Rollout"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            409: components["responses"]["rollout_in_progress"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getAgentRolloutsById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The rollout id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Rollout"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getBrowserProfiles: {
        parameters: {
            query?: {
                /** @description Items per page, 1 to 200 (clamped); default 50. Not an integer: 400 */
                limit?: number;
                /** @description The `next` of the previous page; an id not in the list gives an empty page */
                after?: string;
                /** @description Only this end user's */
                end_user_id?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BrowserProfilePage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    postBrowserProfiles: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    end_user_id: string;
                    name: string;
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BrowserProfile"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            409: components["responses"]["profile_exists"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getBrowserProfilesById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The browser profile id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BrowserProfile"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    deleteBrowserProfilesById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The browser profile id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description No Content */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["profile_in_use"];
        };
    };
    getBrowserLeases: {
        parameters: {
            query?: {
                /** @description Items per page, 1 to 200 (clamped); default 50. Not an integer: 400 */
                limit?: number;
                /** @description The `next` of the previous page; an id not in the list gives an empty page */
                after?: string;
                environment_id?: string;
                state?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BrowserLeasePage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    postBrowserLeases: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    environment_id: string;
                    profile_id?: string | null;
                    /** @enum {unknown} */
                    mode?: "read" | "write" | "clean" | null;
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BrowserLease"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            409: components["responses"]["environment_destroyed-profile_locked"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
            429: components["responses"]["lease_limit_reached"];
            503: components["responses"]["host_unavailable"];
        };
    };
    getBrowserLeasesById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The browser lease id, bls_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BrowserLease"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    postBrowserLeasesByIdRenew: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The browser lease id, bls_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BrowserLease"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["lease_not_active"];
        };
    };
    postBrowserLeasesByIdRelease: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The browser lease id, bls_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": {
                    save?: boolean | null;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BrowserLease"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["lease_not_active"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    postBrowserLeasesByIdTakeover: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The browser lease id, bls_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BrowserTakeover"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["lease_not_active"];
            503: components["responses"]["host_unavailable"];
        };
    };
    postBrowserLeasesByIdHandback: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The browser lease id, bls_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BrowserLease"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["lease_not_active-not_taken_over"];
            503: components["responses"]["host_unavailable"];
        };
    };
    getBrowserLimits: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BrowserLimits"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    getEnvironmentsByIdGateway: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GatewayAccess"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_destroyed"];
        };
    };
    getEnvironmentsByIdSecrets: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecretList"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    putEnvironmentsByIdSecretsByName: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
                /** @description The secret name */
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    value: string;
                    allowed_hosts: string[];
                    infrastructure?: boolean;
                    inject?: string[] | null;
                    allow_minting?: boolean;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Secret"];
                };
            };
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Secret"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_destroyed"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    deleteEnvironmentsByIdSecretsByName: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
                /** @description The secret name */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description No Content */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getSecrets: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecretList"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    putSecretsByName: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The secret name */
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    value: string;
                    allowed_hosts: string[];
                    infrastructure?: boolean;
                    inject?: string[] | null;
                    allow_minting?: boolean;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Secret"];
                };
            };
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Secret"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    deleteSecretsByName: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The secret name */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description No Content */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getEnvironmentsByIdEgress: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EnvironmentEgress"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    putEnvironmentsByIdEgress: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /**
                     * @description A host off the effective allowlist: deny (403 egress_denied, the default) or ask (held as an approval, connector egress:<host>, category connect). Left out: unchanged
                     * @enum {unknown}
                     */
                    unknown_hosts?: "deny" | "ask";
                    allow?: string[] | null;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EnvironmentEgress"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_destroyed"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getEgress: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DeveloperEgress"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    putEgress: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    allow: string[] | null;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DeveloperEgress"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getMcpServers: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["McpServerList"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    getMcpServersByName: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The registration name; its requests are connector mcp:<name> */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["McpServer"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    putMcpServersByName: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The registration name; its requests are connector mcp:<name> */
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description The server's Streamable HTTP endpoint (https://) */
                    url: string;
                    /** @description The environment or developer secret whose placeholder the agent sends as its bearer token; swapped only in Authorization, only to this URL's host (the secret's allowed_hosts must include it) */
                    secret?: string | null;
                    /** @description Tool name → category; first in the order map, annotations, default_category */
                    tools?: {
                        [key: string]: "read" | "write" | "send" | "delete" | "pay" | "change_permission";
                    } | null;
                    /**
                     * @description Tools neither in the map nor annotated in a tools/list answer; omitted: such a tool is change_permission (fail closed)
                     * @enum {unknown}
                     */
                    default_category?: "read" | "write" | "send" | "delete" | "pay" | "change_permission" | null;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["McpServer"];
                };
            };
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["McpServer"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    deleteMcpServersByName: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The registration name; its requests are connector mcp:<name> */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description No Content */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getEnvironmentsByIdMcpServers: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["McpServerList"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getEnvironmentsByIdMcpServersByName: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
                /** @description The registration name; its requests are connector mcp:<name> */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["McpServer"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    putEnvironmentsByIdMcpServersByName: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
                /** @description The registration name; its requests are connector mcp:<name> */
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description The server's Streamable HTTP endpoint (https://) */
                    url: string;
                    /** @description The environment or developer secret whose placeholder the agent sends as its bearer token; swapped only in Authorization, only to this URL's host (the secret's allowed_hosts must include it) */
                    secret?: string | null;
                    /** @description Tool name → category; first in the order map, annotations, default_category */
                    tools?: {
                        [key: string]: "read" | "write" | "send" | "delete" | "pay" | "change_permission";
                    } | null;
                    /**
                     * @description Tools neither in the map nor annotated in a tools/list answer; omitted: such a tool is change_permission (fail closed)
                     * @enum {unknown}
                     */
                    default_category?: "read" | "write" | "send" | "delete" | "pay" | "change_permission" | null;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["McpServer"];
                };
            };
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["McpServer"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_destroyed"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    deleteEnvironmentsByIdMcpServersByName: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
                /** @description The registration name; its requests are connector mcp:<name> */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description No Content */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getWebhookEndpoint: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookEndpoint"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    putWebhookEndpoint: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    url: string;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookEndpoint"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    deleteWebhookEndpoint: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description No Content */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    postWebhookEndpointRotate: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookSecretRotation"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getWebhookDeliveries: {
        parameters: {
            query?: {
                /** @description Items per page, 1 to 200 (clamped); default 50. Not an integer: 400 */
                limit?: number;
                /** @description The `next` of the previous page; an id not in the list gives an empty page */
                after?: string;
                /** @description Only this event's (evt_<24 hex>) */
                event_id?: string;
                status?: "succeeded" | "failed";
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookDeliveryPage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    postTestClockAdvance: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    seconds: number;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TestClock"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Policy"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    putPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    rules: components["schemas"]["PolicyRule"][];
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Policy"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    deletePolicy: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Policy"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    postPolicySimulate: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description The draft, as PUT /v1/policy takes it */
                    rules: components["schemas"]["PolicyRule"][];
                    /** @description Only this environment's requests (404 for one that is not the caller's); omitted: all of the caller's */
                    environment_id?: string | null;
                    since?: (string | number) | null;
                    /** @description The newest this many recorded requests that reached the policy; default 1000 */
                    limit?: number;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PolicySimulation"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getEnvironmentsByIdPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Policy"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    putEnvironmentsByIdPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    rules: components["schemas"]["PolicyRule"][];
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Policy"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            409: components["responses"]["environment_destroyed"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    deleteEnvironmentsByIdPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Policy"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    postEnvironmentsByIdPolicyCheck: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    connector: string;
                    /** @enum {unknown} */
                    category: "read" | "write" | "send" | "delete" | "pay" | "change_permission";
                    task_id?: string | null;
                    session_id?: string | null;
                    /** @description The request's amount, as the gateway decodes it from a payment */
                    amount?: {
                        /** @description ISO 4217, e.g. usd */
                        currency: string;
                        /** @description In the currency's minor units (cents), as Stripe sends amount */
                        minor_units: number;
                    } | null;
                    /** @description Mail recipients (To, Cc, Bcc) or calendar guests */
                    recipients?: string[] | null;
                    /** @description The Slack channel id */
                    channel?: string | null;
                    /** @description An MCP tool the request calls (issue 28): rules naming a tool match only it */
                    tool?: string;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PolicyCheck"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getApprovals: {
        parameters: {
            query?: {
                /** @description Items per page, 1 to 200 (clamped); default 50. Not an integer: 400 */
                limit?: number;
                /** @description The `next` of the previous page; an id not in the list gives an empty page */
                after?: string;
                status?: "pending" | "approved" | "denied" | "expired";
                environment_id?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ApprovalPage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    getApprovalsById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The approval request id, apr_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Approval"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getGrants: {
        parameters: {
            query?: {
                /** @description Items per page, 1 to 200 (clamped); default 50. Not an integer: 400 */
                limit?: number;
                /** @description The `next` of the previous page; an id not in the list gives an empty page */
                after?: string;
                environment_id?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GrantPage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    deleteGrantsById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The grant id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description No Content */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getAuditLog: {
        parameters: {
            query?: {
                /** @description Items per page, 1 to 200 (clamped); default 50. Not an integer: 400 */
                limit?: number;
                /** @description The `next` of the previous page; an id not in the list gives an empty page */
                after?: string;
                environment_id?: string;
                decision?: "allow" | "deny" | "ask";
                connector?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AuditEntryPage"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    getAuditLogVerify: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AuditVerify"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    getOauthClients: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OAuthClientList"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    putOauthClientsByProvider: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The OAuth provider */
                provider: "google" | "slack";
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    client_id: string;
                    client_secret: string;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OAuthClient"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    postConnectionsAuthorize: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    end_user_id: string;
                    connectors: string[];
                    return_url: string;
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AuthorizationLink"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            409: components["responses"]["no_oauth_client"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getConnections: {
        parameters: {
            query?: {
                end_user_id?: string;
                include_revoked?: "true" | "false";
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ConnectionList"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    getConnectionsById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The connection id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Connection"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    deleteConnectionsById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The connection id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Connection"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getEnvironmentsByIdStandInTokens: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The environment id, env_<24 hex> */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StandInTokenList"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    getTeamMembers: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TeamMemberList"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    postTeamMembers: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** Format: email */
                    email: string;
                    name: string;
                    password?: string;
                    /** @description The member's Slack user id (U... or W...); null unlinks it */
                    slack_user_id?: string | null;
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedTeamMember"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            409: components["responses"]["member_exists"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    deleteTeamMembersById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The team member id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description No Content */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    patchTeamMembersById: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The team member id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    name?: string;
                    /** @description The member's Slack user id (U... or W...); null unlinks it */
                    slack_user_id?: string | null;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TeamMember"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    getApprovalChannelsSlack: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SlackApprovalChannel"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            404: components["responses"]["not_found"];
        };
    };
    putApprovalChannelsSlack: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description The Slack app's bot token (xoxb-...): sealed, never returned, sent only to api_base_url */
                    bot_token: string;
                    /** @description The Slack app's signing secret: sealed, never returned; verifies button presses */
                    signing_secret: string;
                    /** @description The channel cards are posted to (C..., G...); the bot must be a member */
                    channel_id: string;
                    /**
                     * Format: uri
                     * @description Default https://slack.com/api; for tests and Slack-compatible servers
                     */
                    api_base_url?: string;
                };
            };
        };
        responses: {
            /** @description OK */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SlackApprovalChannel"];
                };
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
            413: components["responses"]["payload_too_large"];
            415: components["responses"]["unsupported_media_type"];
            422: components["responses"]["invalid_body"];
        };
    };
    deleteApprovalChannelsSlack: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description No Content */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["invalid_request"];
            401: components["responses"]["unauthorized"];
        };
    };
    getBrowserLeasesByIdCdp: {
        parameters: {
            query: {
                /** @description From cdp_url: the credential */
                token: string;
            };
            header?: never;
            path: {
                /** @description The lease id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Switching Protocols: the CDP relay, showing only this lease's context */
            101: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Wrong token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Not a lease's endpoint */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description The lease is not active */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
        };
    };
    getBrowserViewByTokenWs: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The viewer token */
                token: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Switching Protocols: the viewer's screen and input */
            101: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid, expired, used or handed-back token */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description The browser is down */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
        };
    };
}
