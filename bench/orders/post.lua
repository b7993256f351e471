-- POST /orders with a valid body; every request differs in userId so rows differ.
local counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

request = function()
    counter = counter + 1
    local body = string.format(
        '{"userId":"bench-%d","productName":"benchmark product","amount":19.99}', counter)
    return wrk.format(nil, "/orders", nil, body)
end
