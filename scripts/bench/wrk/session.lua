-- GET /v1/session with the access tokens of a file (one per line), each thread cycling over
-- all of them from its own offset (thread n starts at n / THREADS of the list).
-- Arguments: -- TOKEN_FILE THREADS
local requests = {}
local next_index = 0

function init(args)
    for token in io.lines(args[1]) do
        requests[#requests + 1] = wrk.format("GET", "/v1/session", { ["Authorization"] = "Bearer " .. token })
    end
    next_index = math.floor(#requests * id / tonumber(args[2]))
end

function request()
    next_index = next_index % #requests + 1
    return requests[next_index]
end
