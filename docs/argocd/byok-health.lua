-- Argo CD health check for the five byok.gateway.dev kinds (BYOKCredential, Workspace, Guardrail,
-- GatewayAPIKey, Account). Install: docs/argocd/argocd-cm.yaml (one key per kind, this same script).
-- Healthy: Ready=True for the current generation. Progressing: not reconciled yet, or status is for an older
-- generation. Degraded: Ready=False (reason and message from the operator). Suspended: a disabled credential
-- or a GatewayAPIKey that is not live (disabled or expired) although valid.
-- A Ready credential whose key the upstream refuses (UpstreamHealthy=False: Unauthorized, RateLimited, UpstreamErrors,
-- as the gateways report it) is Degraded too: valid config, but requests fall over to the next attempt or fail.
-- To keep Argo CD's health to the config alone (Healthy, with the upstream reason in the message), set
-- upstreamDegrades to false below.
local upstreamDegrades = true
local hs = {}
local generation = nil
if obj.metadata ~= nil then
  generation = obj.metadata.generation
end
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the byok operator to reconcile"
  return hs
end
if generation ~= nil and obj.status.observedGeneration ~= nil and obj.status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the byok operator to observe generation " .. generation
  return hs
end
local ready = nil
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Ready" then
    ready = condition
  end
end
if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Ready condition"
  return hs
end
if generation ~= nil and ready.observedGeneration ~= nil and ready.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the byok operator to observe generation " .. generation
  return hs
end
local message = ready.message or ""
if ready.status == "True" then
  if obj.kind == "BYOKCredential" and obj.spec ~= nil and obj.spec.disabled == true then
    hs.status = "Suspended"
    hs.message = "Disabled: never used for routing"
    return hs
  end
  if obj.kind == "GatewayAPIKey" and obj.status.live == false then
    hs.status = "Suspended"
    hs.message = "Not live (disabled or expired)"
    return hs
  end
  if obj.kind == "BYOKCredential" then
    for _, condition in ipairs(obj.status.conditions) do
      if condition.type == "UpstreamHealthy" and condition.status == "False" then
        hs.status = "Healthy"
        if upstreamDegrades then
          hs.status = "Degraded"
        end
        hs.message = "Upstream " .. (condition.reason or "Unhealthy") .. ": " .. (condition.message or "")
        return hs
      end
    end
  end
  hs.status = "Healthy"
  hs.message = message
  return hs
end
if ready.status == "False" then
  hs.status = "Degraded"
  hs.message = (ready.reason or "NotReady") .. ": " .. message
  return hs
end
hs.status = "Progressing"
hs.message = message
return hs
