-- allocmark's lua workload: tables and strings churned over SCALE units of
-- work, with a window of live objects replaced as it goes. Prints one JSON line.
local scale = tonumber(arg[1] or "10")
local n = 30000 * scale
local window = 20000
local live = {}
local sum = 0
for i = 0, n - 1 do
  local s = string.rep("k" .. i .. "-", 1 + i % 13)
  local t = { key = s, up = string.upper(s), rev = string.reverse(s), n = { i, i % 7 } }
  local a = {}
  for j = 1, i % 40 do a[j] = j .. ":" .. i end
  live[i % window] = { t, a }
  if i % 2000 == 0 then
    local c = 0
    for _, pair in pairs(live) do c = c + #pair[2] end
    table.sort(a)
    sum = sum + c + #table.concat(a, ",")
  end
end
print(string.format('{"ops": %d, "checksum": %d}', n, sum))
