-- Argo CD health check for fabriccap.dev/FabricCapability
-- (argocd-cm key: resource.customizations.health.fabriccap.dev_FabricCapability).
--
-- Mirrors kstatus, which Flux and `kubectl wait` use, so every GitOps tool gates alike:
--   status older than the spec (observedGeneration < generation)  -> Progressing
--   Stalled=True (the pool can never become Ready as configured)  -> Degraded
--   Ready=True (every node advertises the same N > 0, plugin Ready) -> Healthy
--   Ready=False or Unknown, or no Ready condition yet             -> Progressing
-- Argo CD runs Lua 5.1 (gopher-lua): keep to what 5.1 and 5.4 share.
local hs = {}

local function condition(status, conditionType)
  if status == nil or status.conditions == nil then
    return nil
  end
  for _, item in ipairs(status.conditions) do
    if item.type == conditionType then
      return item
    end
  end
  return nil
end

local function describe(item)
  if item.message ~= nil and item.message ~= "" then
    return item.message
  end
  if item.reason ~= nil then
    return item.reason
  end
  return ""
end

local status = obj.status
if status == nil then
  hs.status = "Progressing"
  hs.message = "waiting for status: the fabriccap operator has not evaluated this pool yet"
  return hs
end

local generation = nil
if obj.metadata ~= nil then
  generation = obj.metadata.generation
end
if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "waiting for status: observedGeneration " .. tostring(status.observedGeneration)
    .. " is older than generation " .. tostring(generation)
  return hs
end

local stalled = condition(status, "Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled)
  return hs
end

local ready = condition(status, "Ready")
if ready == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the Ready condition"
  return hs
end
if ready.status == "True" then
  hs.status = "Healthy"
else
  hs.status = "Progressing"
end
hs.message = describe(ready)
return hs
