-- POST /v1/token/refresh, every request with its own unused refresh token (each is single-use):
-- first this thread's share of a file (one token per line; line n goes to thread n mod THREADS),
-- then the successors that the answers return (the app's own rotation). A thread that runs out
-- sends "exhausted", which the gateway answers 401 and the run counts as an error.
-- Arguments: -- TOKEN_FILE THREADS [PATH] (default /v1/token/refresh; the Supabase door's is
-- /auth/v1/token?grant_type=refresh_token, whose answer carries the successor the same way)
local queue = {}
local path = "/v1/token/refresh"
local head, tail = 1, 0

local function push(token)
    tail = tail + 1
    queue[tail] = token
end

function init(args)
    local threads = tonumber(args[2])
    if args[3] then path = args[3] end
    local line = 0
    for token in io.lines(args[1]) do
        if line % threads == id then push(token) end
        line = line + 1
    end
end

local headers = { ["Content-Type"] = "application/json" }

function request()
    local token = "exhausted"
    if head <= tail then
        token = queue[head]
        queue[head] = nil
        head = head + 1
    end
    return wrk.format("POST", path, headers, '{"refresh_token":"' .. token .. '"}')
end

function response(status, _, body)
    if status == 200 then
        local token = body:match('"refresh_token":"([^"]+)"')
        if token then push(token) end
    end
end
