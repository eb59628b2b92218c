-- Argo CD health check for orca's Workload (orca.cloudinit.dev/v1alpha1), read from the
-- conditions orca writes (kstatus's own rules, so Argo CD and Flux agree):
--   not decided yet (status.observedGeneration behind metadata.generation)  Progressing
--   Stalled True: an invalid spec, or only reasons freed capacity cannot cure  Degraded
--   Reconciling True: waiting for capacity, or to be placed again             Progressing
--   Ready True: every replica placed for the current generation                Healthy
local hs = {}
local status = obj.status
if status == nil or status.observedGeneration == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for orca to decide"
  return hs
end
local generation = obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for orca to decide generation " .. generation
  return hs
end
local conditions = {}
if status.conditions ~= nil then
  for _, condition in ipairs(status.conditions) do
    conditions[condition.type] = condition
  end
end
local function holds(type)
  return conditions[type] ~= nil and conditions[type].status == "True"
end
if holds("Stalled") then
  hs.status = "Degraded"
  hs.message = conditions["Stalled"].message
elseif holds("Reconciling") then
  hs.status = "Progressing"
  hs.message = conditions["Reconciling"].message
elseif holds("Ready") then
  hs.status = "Healthy"
  hs.message = conditions["Ready"].message
else
  hs.status = "Progressing"
  hs.message = status.message or "Waiting for orca"
end
return hs
