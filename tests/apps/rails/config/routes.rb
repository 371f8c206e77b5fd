Rails.application.routes.draw do
  root "pages#show"
  get "items", to: "pages#items"
  get "form", to: "pages#form"
  post "form", to: "pages#submit"
  get "counter", to: "pages#counter"
  get "client", to: "pages#client"
  get "slow", to: "pages#slow"
  get "pid", to: "pages#pid"
  get "live", to: "live#stream"
  get "release", to: "live#release"
end
