set_policy(2)
redis.call('publish', ARGV[1], '1')
return 1
