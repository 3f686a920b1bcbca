-- Health of a fabriccap.dev/FabricCapability: is the node pool safe to wire to the fabric?
--
-- Mirrors kstatus, which Flux and `kubectl wait` use, so every GitOps tool gates alike:
--   no status written yet (none, or the CRD's default)              -> Progressing
--   status not of the spec (observedGeneration ~= generation)      -> Progressing
--   Stalled=True (the pool can never become Ready as configured)   -> Degraded
--   Ready=True (every node advertises the same N > 0, plugin Ready) -> Healthy
--   Ready=False or Unknown, or no Ready condition yet              -> Progressing
--
-- Only base and table functions: Argo CD runs scripts from argocd-cm without the Lua
-- standard libraries (no string, math or os) unless useOpenLibs is set.
local hs = {}

local function condition(status, conditionType)
  if status.conditions == nil then
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

-- Until the operator writes the status, the API server serves the CRD's default for it,
-- {observedGeneration: 0}, with no condition: the same "not evaluated yet".
local status = obj.status
if status == nil or (status.conditions == nil and tonumber(status.observedGeneration) == 0) then
  hs.status = "Progressing"
  hs.message = "waiting for status: the fabriccap operator has not evaluated this pool yet"
  return hs
end

-- Compared as numbers: two generations that arrive as strings ("9" and "10") would compare
-- as text, and an outdated status would read as current. Anything that is not a number
-- counts as outdated; like kstatus, any other generation than the spec's is not current.
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  local generation = tonumber(obj.metadata.generation)
  local observed = nil
  if status.observedGeneration ~= nil then
    observed = tonumber(status.observedGeneration)
  end
  if generation == nil or observed == nil or observed ~= generation then
    hs.status = "Progressing"
    hs.message = "waiting for status of generation " .. tostring(obj.metadata.generation)
      .. " (observedGeneration " .. tostring(status.observedGeneration) .. ")"
    return hs
  end
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
