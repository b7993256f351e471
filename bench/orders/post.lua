-- POST /orders with a valid body; every request differs in userId so rows differ.
local counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
-- The token run.py gives the service, from the environment (never the command line).
wrk.headers["Authorization"] = "Bearer " .. assert(os.getenv("ORDERS_BENCH_TOKEN"), "ORDERS_BENCH_TOKEN is not set")

request = function()
    counter = counter + 1
    local body = string.format(
        '{"userId":"bench-%d","productName":"benchmark product","amount":19.99}', counter)
    return wrk.format(nil, "/orders", nil, body)
end
